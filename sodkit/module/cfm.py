"""F3Net's cross feature module (Wei et al., AAAI 2020), written from the paper's description.

A fine (low-level) map and a coarse (high-level) map are each transformed, multiplied (the
product keeps only what both agree on: detail that is also semantically salient), and the
product is added back to both branches before they are refined and summed. The decoder cascades
CFMs from the coarsest level to the finest.
"""

from __future__ import annotations

from torch import Tensor, nn

from .conv import ConvBNAct, resize_to


class CFM(nn.Module):
    """``CFM(fine, coarse) -> fused map`` at the fine map's size, ``width`` channels."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fine_in = ConvBNAct(width, width, 3)
        self.coarse_in = ConvBNAct(width, width, 3)
        self.fine_out = ConvBNAct(width, width, 3)
        self.coarse_out = ConvBNAct(width, width, 3)
        self.merge = ConvBNAct(width, width, 3)

    def forward(self, fine: Tensor, coarse: Tensor) -> Tensor:
        fine = self.fine_in(fine)
        coarse = self.coarse_in(resize_to(coarse, fine.shape[-2:]))
        agreed = fine * coarse
        fine = self.fine_out(fine + agreed)
        coarse = self.coarse_out(coarse + agreed)
        return self.merge(fine + coarse)
