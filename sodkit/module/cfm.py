"""F3Net's cross feature module (Wei et al., "F3Net: Fusion, Feedback and Focus for Salient Object
Detection", AAAI 2020), built to match the authors' released code.

A fine (low-level, higher resolution) map and a coarse (high-level) map, both ``width``
channels, each pass two 3x3 ConvBNReLUs; their product keeps what both agree on and is added
back, through a 3x3 ConvBNReLU, onto each branch's first map; one more 3x3 ConvBNReLU refines
each branch. Both refined maps come out: the fine one is the decoder's output at this level
(and, in the second decoder, a side output), the coarse one is the running map handed to the
next finer level. Eight convolutions in all; they keep their biases as in the original.
"""

from __future__ import annotations

from torch import Tensor, nn

from .conv import ConvBNAct, resize_to


def _branch(width: int) -> nn.ModuleList:
    return nn.ModuleList(ConvBNAct(width, width, 3, bias=True) for _ in range(4))


class CFM(nn.Module):
    """``CFM(fine, coarse) -> (fine_out, coarse_out)`` at the fine map's size.

    ``fine[2:]`` are the convs that only produce ``fine_out``: a network that does not use it
    (F3Net's second decoder without side outputs) passes ``need_fine=False`` and freezes them.
    """

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fine = _branch(width)
        self.coarse = _branch(width)

    def forward(self, fine: Tensor, coarse: Tensor, need_fine: bool = True
                ) -> tuple[Tensor | None, Tensor]:
        coarse = resize_to(coarse, fine.shape[-2:])
        f_in = self.fine[0](fine)
        c_in = self.coarse[0](coarse)
        agreed = self.fine[1](f_in) * self.coarse[1](c_in)
        c_out = self.coarse[3](self.coarse[2](agreed) + c_in)
        f_out = self.fine[3](self.fine[2](agreed) + f_in) if need_fine else None
        return f_out, c_out
