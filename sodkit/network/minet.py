"""``minet``: MINet (Pang et al., CVPR 2020): AIM per level, SIM decoder blocks, deep supervision.

Each backbone map gets a 1x1 lateral ConvBNAct to ``decoder_channels`` (channels come from the
backbone's ``feature_info``); an :class:`~sodkit.module.interaction.AIM` fuses every level with
its neighbours; the top-down decoder adds the running map (resized to the level's size) to the
level's AIM output and refines it with a :class:`~sodkit.module.interaction.SIM`. A 1x1 head per
level predicts a logit map. The paper's decoder width (64 at ResNet-50) is ``decoder_channels``.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..backbone import Backbone
from ..config.schema import ModelCfg
from ..module import AIM, SIM, ConvBNAct, resize_to
from .base import NETWORKS, SODNetwork


@NETWORKS.register("minet")
class MINet(SODNetwork):
    """Backbone + AIMs + SIM decoder.

    Output: ``{"logits": (B, 1, H, W), "aux": [...]}``; ``aux`` holds the coarser levels' head
    outputs at their own resolutions, coarse to fine (as in ``fpn``).
    """

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        self.backbone = Backbone.from_cfg(cfg)
        width = cfg.decoder_channels
        chans = self.backbone.channels
        last = len(chans) - 1
        self.laterals = nn.ModuleList(ConvBNAct(c, width, kernel_size=1) for c in chans)
        self.aims = nn.ModuleList(AIM(width, 1 + int(i > 0) + int(i < last))
                                  for i in range(len(chans)))
        self.sims = nn.ModuleList(SIM(width) for _ in chans)
        self.heads = nn.ModuleList(nn.Conv2d(width, 1, kernel_size=1) for _ in chans)

    def _aim(self, i: int, *maps: Tensor) -> Tensor:
        return self.aims[i](list(maps))

    def _level(self, i: int, aimed: Tensor, x: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """One decoder level: AIM output + the coarser running map, through the SIM; and its
        logit map (None for a side level when side outputs are off)."""
        if x is not None:
            aimed = aimed + resize_to(x, aimed.shape[-2:])
        x = self.sims[i](aimed)
        return x, self.heads[i](x) if i == 0 or self.aux_outputs else None

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        feats = self.backbone(image)
        lat = [self._run(self.laterals[i], f) for i, f in enumerate(feats)]
        aimed = []
        for i in range(len(lat)):
            neighbours = [lat[j] for j in (i - 1, i + 1) if 0 <= j < len(lat)]
            aimed.append(self._run(self._aim, i, lat[i], *neighbours))
        return self._top_down(aimed, image)
