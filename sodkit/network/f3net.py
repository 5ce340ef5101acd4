"""``f3net``: F3Net (Wei et al., "F3Net: Fusion, Feedback and Focus for Salient Object
Detection", AAAI 2020), as the authors' released code builds it (github.com/weijun88/F3Net).

Levels are the backbone's maps (the published recipe: ResNet-50 strides 4-32, i.e.
``model.out_indices: [1, 2, 3, 4]``). Width ``w = model.decoder_channels`` (64).

1. Squeeze: a 1x1 ConvBNReLU per level to ``w`` channels.
2. Decoder 1 cascades :class:`~sodkit.module.cfm.CFM` blocks from the coarsest level to the
   finest: the CFM at level ``i`` fuses the level's map with the running coarse map and returns
   the level's refined map and the new running map. Its final running map is the first
   prediction feature ``p1``.
3. Feedback: ``p1`` is bilinearly resized to every level and added to decoder 1's refined maps
   (and to the coarsest squeezed map); decoder 2, with its own CFMs, runs the cascade again on
   them. Its final running map ``p2`` gives the main output.
4. Heads are 3x3 convs to one channel: ``p2`` (main), ``p1`` and decoder 2's refined map of every
   level. The original upsamples them all to the input size and supervises each with the
   structure loss, weighted (p1 + p2) / 2 + r2 / 2 + r3 / 4 + r4 / 8 + r5 / 16; here ``aux``
   holds them at their own resolutions, ``[r5, r4, r3, r2, p1]`` (coarse to fine, then p1), and
   the published recipe upsamples them in the loss (``loss.aux_upsample``) with those weights.

Decoder convolutions start from Kaiming-normal weights (fan-in, ReLU) and zero biases, as the
original's ``weight_init`` does.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..backbone import Backbone
from ..backbone.levels import STRIDES_4_TO_32
from ..config.schema import ModelCfg
from ..module import CFM, ConvBNAct, resize_to
from .base import NETWORKS, SODNetwork


def _head(width: int) -> nn.Conv2d:
    return nn.Conv2d(width, 1, kernel_size=3, padding=1)


@NETWORKS.register("f3net")
class F3Net(SODNetwork):
    """Backbone + two cascaded CFM decoders joined by feedback."""

    STRIDES = STRIDES_4_TO_32  # what model.out_indices: auto picks

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        self.backbone = Backbone.from_cfg(cfg, self.STRIDES)
        width, chans = cfg.decoder_channels, self.backbone.channels
        if len(chans) < 2:
            raise ValueError(f"F3Net needs at least 2 backbone levels, got {chans}")
        self.squeeze = nn.ModuleList(ConvBNAct(c, width, 1, bias=True) for c in chans)
        # decoder k's CFM i fuses level i with the running map coming from level i + 1
        self.decoder1 = nn.ModuleList(CFM(width) for _ in chans[:-1])
        self.decoder2 = nn.ModuleList(CFM(width) for _ in chans[:-1])
        self.head = _head(width)  # p2: the main output
        self.head1 = _head(width)  # p1
        self.side_heads = nn.ModuleList(_head(width) for _ in chans)  # decoder 2, every level
        for module in (self.squeeze, self.decoder1, self.decoder2, self.head, self.head1,
                       self.side_heads):
            _init_like_f3net(module)

    def aux_modules(self) -> list[nn.Module]:
        """Side heads, p1's head and decoder 2's refined-map convs: only side outputs use them."""
        return [self.head1, self.side_heads, *(cfm.fine[2:] for cfm in self.decoder2)]

    @property
    def side_outputs(self) -> int:
        """Decoder 2's map at every level, then p1."""
        return len(self.side_heads) + 1

    def _decode(self, decoder: nn.ModuleList, maps: list[Tensor], fed: Tensor | None,
                need_refined: bool = True) -> tuple[list[Tensor | None], Tensor]:
        """One cascade: each level's refined map (the coarsest level's map as it came in) and
        the final running map. ``fed``: feedback added to every level first."""
        if fed is not None:
            maps = [m + resize_to(fed, m.shape[-2:]) for m in maps]
        refined: list[Tensor | None] = [None] * len(decoder) + [maps[-1]]
        running = maps[-1]
        for i in reversed(range(len(decoder))):
            refined[i], running = self._run(decoder[i], maps[i], running, need_refined)
        return refined, running

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        feats = self.backbone(image)
        maps = [self._run(self.squeeze[i], f) for i, f in enumerate(feats)]
        refined1, p1 = self._decode(self.decoder1, maps, None)
        refined2, p2 = self._decode(self.decoder2, refined1, p1, self.aux_outputs)
        coarse = self.head(p2)
        logits = resize_to(coarse, image.shape[-2:])
        aux: list[Tensor] = []
        if self.aux_outputs:
            aux = [self.side_heads[i](refined2[i]) for i in reversed(range(len(refined2)))]
            aux.append(self.head1(p1))
        # coarse_logits: the main output before its upsampling, which the f3net inference
        # pipeline resizes straight to the image's size as the original does
        return {"logits": logits, "aux": aux, "coarse_logits": coarse}


def _init_like_f3net(module: nn.Module) -> None:
    """Kaiming-normal (fan-in, ReLU) conv weights and zero biases; BatchNorm keeps 1 / 0."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
