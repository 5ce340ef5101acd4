"""FLOPs of the ops ``torch.utils.flop_counter`` has no formula for (sodkit/engine/flops.py),
against hand counts on tiny shapes: a multiply-add counts 2."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode
from torchvision.ops import deform_conv2d

from sodkit.engine import flops
from sodkit.module.aspp import ASPPDeformable, DeformConv2d


def _count(fn, *, extra: bool = True) -> int:
    mode = flops.counter() if extra else FlopCounterMode(display=False)
    with mode:
        fn()
    return mode.get_total_flops()


def test_deform_conv2d_counts_as_the_convolution_of_its_shapes() -> None:
    x, weight = torch.randn(2, 4, 8, 10), torch.randn(5, 4, 3, 3)
    offset, mask = torch.randn(2, 18, 8, 10), torch.rand(2, 9, 8, 10)
    hand = 2 * (2 * 8 * 10) * 5 * (4 * 3 * 3)  # batch x pixels x C_out x C_in k^2, 2 per MAC
    assert _count(lambda: deform_conv2d(x, offset, weight, padding=1, mask=mask)) == hand
    assert _count(lambda: deform_conv2d(x, offset, weight, padding=1, mask=mask),
                  extra=False) == 0  # what the plain counter sees: nothing
    # equal to the ordinary convolution of the same shapes, as the plain counter counts it
    assert _count(lambda: F.conv2d(x, weight, padding=1), extra=False) == hand
    # strided, grouped: output pixels and C_in / groups
    grouped = torch.randn(6, 2, 3, 3)
    out = deform_conv2d(x, torch.zeros(2, 18, 4, 5), grouped, stride=2, padding=1)
    assert out.shape[-2:] == (4, 5)
    assert _count(lambda: deform_conv2d(x, torch.zeros(2, 18, 4, 5), grouped, stride=2,
                                        padding=1)) == 2 * 2 * 4 * 5 * 6 * 2 * 9


def test_deformable_aspp_counts_offsets_modulator_and_sampled_convolution() -> None:
    torch.manual_seed(0)
    conv = DeformConv2d(4, 6, 3).eval()
    x = torch.randn(1, 4, 5, 5)
    pixels = 5 * 5
    hand = 2 * pixels * 4 * 9 * (18 + 9 + 6)  # offset (18), modulator (9), sampled conv (6)
    with torch.no_grad():
        assert _count(lambda: conv(x)) == hand
        block = ASPPDeformable(8).eval()
        y = torch.randn(1, 8, 6, 6)
        per_branch = [2 * 36 * 8 * k * k * (3 * k * k + 256) for k in (1, 1, 3, 7)]
        pooled = 2 * 8 * 256  # the 1x1 conv on the pooled 1x1 map
        fuse = 2 * 36 * (5 * 256) * 8
        assert _count(lambda: block(y)) == sum(per_branch) + pooled + fuse


def test_cpu_attention_counts_its_two_matrix_products() -> None:
    # equal head widths: the CPU's fused kernel (other widths fall back to counted matmuls)
    q, k, v = torch.randn(2, 3, 49, 16), torch.randn(2, 3, 20, 16), torch.randn(2, 3, 20, 16)
    hand = 2 * (2 * 2 * 3 * 49 * 20 * 16)  # Q K^T, then P V
    mask = torch.zeros(49, 20)
    assert _count(lambda: F.scaled_dot_product_attention(q, k, v)) == hand
    assert _count(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) == hand
    assert _count(lambda: F.scaled_dot_product_attention(q, k, v), extra=False) == 0

    def explicit() -> torch.Tensor:  # what timm's unfused path computes
        return ((q * 16 ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v

    assert _count(explicit, extra=False) == hand


def test_cpu_attention_backward_counts_the_gradients_products() -> None:
    shapes = [(1, 2, 12, 8), (1, 2, 12, 8), (1, 2, 12, 8)]

    def step(fused: bool) -> None:
        q, k, v = (torch.randn(s, requires_grad=True) for s in shapes)
        out = F.scaled_dot_product_attention(q, k, v) if fused else \
            ((q * 8 ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        out.sum().backward()

    product = 2 * 2 * 12 * 12 * 8
    # explicit: forward 2 products, backward 4 (dV, dP, dQ, dK); the fused kernel's backward
    # also recomputes Q K^T (torch's own formula, as for the CUDA kernels): 5
    assert _count(lambda: step(False), extra=False) == 6 * product
    assert _count(lambda: step(True)) == 7 * product


def test_info_counts_on_the_cpu_where_the_meta_device_cannot_run_a_forward() -> None:
    from sodkit.engine.info import _counted_flops

    class NeedsValues(torch.nn.Module):  # a data-dependent forward: .item() on meta fails
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.conv(x) * float(x.abs().max().item() >= 0)

    with torch.device("meta"):
        meta = NeedsValues()
    assert _counted_flops(meta, NeedsValues, 8) == 2 * 8 * 8 * 3 * 4
