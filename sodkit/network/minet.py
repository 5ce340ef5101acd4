"""``minet``: MINet (Pang et al., "Multi-scale Interactive Network for Salient Object Detection",
CVPR 2020), as the authors' released ``MINet_Res50`` builds it (github.com/lartpang/MINet).

Levels are the backbone's maps (ResNet-50 with all five: strides 2-32, 64-2048 channels; the
channels come from ``feature_info``). Width ``w = model.decoder_channels`` (64 in the paper).

1. :class:`~sodkit.module.interaction.AIM`: every level fused with its adjacent levels on the
   backbone's own channels, to ``w`` channels.
2. Top-down decoder, coarsest level first: the coarser level's decoded map is bilinearly
   upsampled and added to the level's AIM output, then a :class:`~sodkit.module.interaction.SIM`
   (``w`` / ``w // 2`` channels) and a 3x3 ConvBNReLU ("upconv": to ``w``, or ``w // 2`` at the
   finest level).
3. The finest decoded map is upsampled to the input size, refined by one more 3x3 ConvBNReLU at
   full resolution, and a 1x1 classifier gives the logits. Only this output is supervised in
   the original (BCE + CEL).

Beyond the original, and off in the published recipe: deep supervision. A 1x1 head per coarser
level predicts a side output from its decoded map (``aux``, coarse to fine); the heads exist in
every model (4 x 65 parameters at ResNet-50) but are computed and trained only when the loss
weights side outputs (``loss.aux_weight`` / ``loss.aux_weights``).
"""

from __future__ import annotations

from torch import Tensor, nn

from ..backbone import Backbone
from ..backbone.levels import STRIDES_2_TO_32
from ..config.schema import ModelCfg
from ..module import AIM, SIM, ConvBNAct, resize_to
from .base import NETWORKS, SODNetwork


@NETWORKS.register("minet")
class MINet(SODNetwork):
    """Backbone + AIM + SIM decoder + full-resolution classifier.

    Output: ``{"logits": (B, 1, H, W), "aux": [...]}``; ``aux`` holds the coarser levels' side
    outputs at their own resolutions, coarse to fine (empty when side outputs are off).
    """

    STRIDES = STRIDES_2_TO_32  # model.out_indices: auto: ResNet's five levels, as MINet_Res50

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        self.backbone = Backbone.from_cfg(cfg, self.STRIDES)
        width, chans = cfg.decoder_channels, self.backbone.channels
        narrow = max(width // 2, 1)
        self.aim = AIM(chans, width)
        self.sims = nn.ModuleList(SIM(width, narrow) for _ in chans)
        self.upconvs = nn.ModuleList(ConvBNAct(width, narrow if i == 0 else width, 3)
                                     for i in range(len(chans)))
        self.final = ConvBNAct(narrow, narrow, 3)
        self.classifier = nn.Conv2d(narrow, 1, kernel_size=1)
        self.side_heads = nn.ModuleList(nn.Conv2d(width, 1, kernel_size=1) for _ in chans[1:])

    def aux_modules(self) -> list[nn.Module]:
        return [self.side_heads]

    def _aim(self, i: int, *maps: Tensor) -> Tensor:
        return self.aim[i](*maps)

    def _decode(self, i: int, aimed: Tensor, coarser: Tensor | None) -> Tensor:
        """Decoder level ``i``: the upsampled coarser map plus the AIM output, SIM, upconv."""
        if coarser is not None:
            aimed = aimed + resize_to(coarser, aimed.shape[-2:])
        return self.upconvs[i](self.sims[i](aimed))

    def _classify(self, finest: Tensor, size: tuple[int, int]) -> Tensor:
        return self.classifier(self.final(resize_to(finest, size)))

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        feats = self.backbone(image)
        levels = len(feats)
        aimed = [self._run(self._aim, i, *(feats[j] for j in AIM.neighbours(i, levels)))
                 for i in range(levels)]
        x: Tensor | None = None
        aux: list[Tensor] = []
        for i in reversed(range(levels)):
            x = self._run(self._decode, i, aimed[i], x)
            if i > 0 and self.aux_outputs:
                aux.append(self.side_heads[i - 1](x))
        logits = self._run(self._classify, x, image.shape[-2:])
        return {"logits": logits, "aux": aux}
