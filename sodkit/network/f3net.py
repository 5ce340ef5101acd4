"""``f3net``: F3Net-style cascaded feedback decoder (Wei et al., AAAI 2020).

Each backbone map is squeezed to ``decoder_channels`` by a 1x1 ConvBNAct (channels from the
backbone's ``feature_info``). Decoder 1 cascades :class:`~sodkit.module.cfm.CFM` blocks from the
coarsest level to the finest. Its finest map is fed back: it is resized to every level and added
to that level's squeezed map, and decoder 2 (its own CFMs) runs the cascade again on the
corrected features. The main logits come from decoder 2's finest map; side outputs are decoder
2's coarser maps (coarse to fine) and decoder 1's finest map (last in ``aux``).
"""

from __future__ import annotations

from torch import Tensor, nn

from ..backbone import Backbone
from ..config.schema import ModelCfg
from ..module import CFM, ConvBNAct, resize_to
from .base import NETWORKS, SODNetwork


@NETWORKS.register("f3net")
class F3Net(SODNetwork):
    """Backbone + two cascaded CFM decoders joined by feedback."""

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        self.backbone = Backbone.from_cfg(cfg)
        width = cfg.decoder_channels
        chans = self.backbone.channels
        self.squeeze = nn.ModuleList(ConvBNAct(c, width, kernel_size=1) for c in chans)
        # decoder k's CFM at level i fuses level i with the running map from level i + 1
        self.decoder1 = nn.ModuleList(CFM(width) for _ in chans[:-1])
        self.decoder2 = nn.ModuleList(CFM(width) for _ in chans[:-1])
        self.head = nn.Conv2d(width, 1, kernel_size=1)  # decoder 2, finest: the main output
        self.head1 = nn.Conv2d(width, 1, kernel_size=1)  # decoder 1, finest
        self.side_heads = nn.ModuleList(nn.Conv2d(width, 1, kernel_size=1) for _ in chans[1:])

    def aux_modules(self) -> list[nn.Module]:
        return [self.head1, self.side_heads]

    def _cascade(self, decoder: nn.ModuleList, maps: list[Tensor]) -> list[Tensor]:
        """Coarse-to-fine CFM cascade; returns the decoded map of every level (finest first)."""
        out = [maps[-1]]
        for i in reversed(range(len(decoder))):
            out.insert(0, self._run(decoder[i], maps[i], out[0]))
        return out

    @staticmethod
    def _feedback(maps: list[Tensor], fed: Tensor) -> list[Tensor]:
        return [m + resize_to(fed, m.shape[-2:]) for m in maps]

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        feats = self.backbone(image)
        maps = [self._run(self.squeeze[i], f) for i, f in enumerate(feats)]
        first = self._cascade(self.decoder1, maps)
        second = self._cascade(self.decoder2, self._run(self._feedback, maps, first[0]))
        logits = resize_to(self.head(second[0]), image.shape[-2:])
        aux: list[Tensor] = []
        if self.aux_outputs:
            aux = [self.side_heads[i - 1](second[i]) for i in reversed(range(1, len(second)))]
            aux.append(self.head1(first[0]))
        return {"logits": logits, "aux": aux}
