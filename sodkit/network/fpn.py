"""``fpn``: a plain feature pyramid decoder, the fast baseline every other method is compared to.

Each backbone map gets a 1x1 lateral ConvBNAct to ``decoder_channels``; going from the coarsest
level to the finest, the running map is bilinearly resized to the next lateral's size (not 2x:
inputs that are not multiples of 32 give odd sizes), added, and smoothed by a 3x3 ConvBNAct.
A 1x1 head per level predicts a saliency logit map.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..backbone import Backbone
from ..backbone.levels import STRIDES_4_TO_32
from ..config.schema import ModelCfg
from ..module import ConvBNAct, resize_to
from .base import NETWORKS, SODNetwork


@NETWORKS.register("fpn")
class FPN(SODNetwork):
    """Backbone + top-down pyramid.

    Output: ``{"logits": (B, 1, H, W), "aux": [...]}``: ``logits`` is the finest level's head
    resized to the input; ``aux`` holds the other levels' head outputs at their own resolutions,
    **coarse to fine** (``aux[0]`` is the lowest resolution).
    """

    STRIDES = STRIDES_4_TO_32  # P2-P5 of a classic FPN; what model.out_indices: auto picks

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        self.backbone = Backbone.from_cfg(cfg, self.STRIDES)
        width = cfg.decoder_channels
        chans = self.backbone.channels
        self.laterals = nn.ModuleList(ConvBNAct(c, width, kernel_size=1) for c in chans)
        self.smooth = nn.ModuleList(ConvBNAct(width, width, kernel_size=3) for _ in chans)
        self.heads = nn.ModuleList(nn.Conv2d(width, 1, kernel_size=1) for _ in chans)

    def _level(self, i: int, feat: Tensor, x: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """One pyramid level: lateral + upsampled coarser map, smoothed; and its logit map
        (None for a side level when side outputs are off)."""
        lateral = self.laterals[i](feat)
        if x is not None:
            lateral = lateral + resize_to(x, lateral.shape[-2:])
        x = self.smooth[i](lateral)
        return x, self.heads[i](x) if i == 0 or self.aux_outputs else None

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        return self._top_down(self.backbone(image), image)
