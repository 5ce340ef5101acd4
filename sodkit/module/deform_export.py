"""Deformable convolution in forms ONNX can hold, swapped in for an export only.

torchvision's ``deform_conv2d`` has no ONNX export. Two forms equal it:

- ``"decomposed"``: the operator spelled out in ops every opset from 16 has: each kernel tap's
  bilinear samples by ``grid_sample`` (zeros outside the map, as ``deform_conv2d`` treats an
  out-of-bounds sample), times the modulation mask, then one matrix product with the kernel.
  Runs in any onnxruntime that runs opset 16.
- ``"DeformConv"``: ONNX's own ``DeformConv`` operator (opset 19), one node; onnxruntime has a
  CPU kernel for it only in its newer releases.

:func:`deform_export_form` sets the form on every :class:`~sodkit.module.aspp.DeformConv2d` of
a model for the length of a ``with`` block; outside it the modules run torchvision's operator,
so training and PyTorch inference never see these forms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.ops import deform_conv2d

from .aspp import DeformConv2d

Form = Literal["decomposed", "DeformConv"]
DECOMPOSED_MIN_OPSET = 16  # GridSample
DEFORM_CONV_MIN_OPSET = 19


def deform_conv2d_decomposed(x: Tensor, offset: Tensor, weight: Tensor, mask: Tensor,
                          padding: int) -> Tensor:
    """``torchvision.ops.deform_conv2d(x, offset, weight, padding=padding, mask=mask)`` (stride
    1, dilation 1, one weight and offset group, no bias) by ``grid_sample`` and a matmul.

    Tap ``k = ky * kw + kx`` of output pixel (i, j) samples ``x`` at
    (i - padding + ky + offset[2k], j - padding + kx + offset[2k + 1]); with
    ``align_corners=False`` the pixel coordinate p maps to (2p + 1) / size - 1, which
    ``grid_sample`` maps back to p, so its bilinear weights and zero padding are the operator's.
    """
    batch, channels, height, width = x.shape
    out_channels, _, kh, kw = weight.shape
    taps = kh * kw
    out_h, out_w = offset.shape[-2:]
    offset = offset.reshape(batch, taps, 2, out_h, out_w)
    # (taps, out_h, 1) rows and (taps, 1, out_w) columns of the regular grid
    rows = torch.arange(out_h, dtype=x.dtype, device=x.device).reshape(1, -1, 1) - padding
    cols = torch.arange(out_w, dtype=x.dtype, device=x.device).reshape(1, 1, -1) - padding
    ky = torch.arange(kh, dtype=x.dtype, device=x.device).repeat_interleave(kw)
    kx = torch.arange(kw, dtype=x.dtype, device=x.device).repeat(kh)
    y = rows + ky.reshape(-1, 1, 1) + offset[:, :, 0]  # (batch, taps, out_h, out_w)
    x_ = cols + kx.reshape(-1, 1, 1) + offset[:, :, 1]
    grid = torch.stack([(2 * x_ + 1) / width - 1, (2 * y + 1) / height - 1], dim=-1)
    sampled = F.grid_sample(x, grid.reshape(batch, taps * out_h, out_w, 2), mode="bilinear",
                            padding_mode="zeros", align_corners=False)
    sampled = sampled.reshape(batch, channels, taps, out_h, out_w) * mask.reshape(
        batch, 1, taps, out_h, out_w)
    columns = sampled.reshape(batch, channels * taps, out_h * out_w)
    out = torch.matmul(weight.reshape(out_channels, channels * taps), columns)
    return out.reshape(batch, out_channels, out_h, out_w)


class _DeformConvOp(torch.autograd.Function):
    """torchvision's operator in PyTorch; one ONNX ``DeformConv`` node in an export."""

    @staticmethod
    def forward(ctx, x: Tensor, offset: Tensor, weight: Tensor, mask: Tensor,
                padding: int) -> Tensor:
        return deform_conv2d(x, offset, weight, padding=padding, mask=mask)

    @staticmethod
    def symbolic(g, x, offset, weight, mask, padding: int):
        kernel = weight.type().sizes()[-2:]
        bias = g.op("Constant", value_t=torch.zeros(weight.type().sizes()[0]))
        return g.op("DeformConv", x, weight, offset, bias, mask, kernel_shape_i=kernel,
                    pads_i=[padding] * 4, strides_i=[1, 1], dilations_i=[1, 1])


def deform_conv2d_onnx_op(x: Tensor, offset: Tensor, weight: Tensor, mask: Tensor,
                          padding: int) -> Tensor:
    """The ``"DeformConv"`` form (the same values as torchvision's in PyTorch)."""
    return _DeformConvOp.apply(x, offset, weight, mask, padding)


FORMS: dict[str, Callable[..., Tensor]] = {"decomposed": deform_conv2d_decomposed,
                                           "DeformConv": deform_conv2d_onnx_op}


def min_opset(form: Form) -> int:
    """The first opset that holds ``form`` (GridSample: 16; DeformConv: 19)."""
    return DEFORM_CONV_MIN_OPSET if form == "DeformConv" else DECOMPOSED_MIN_OPSET


def has_deformable(model: nn.Module) -> bool:
    """Whether ``model`` holds a deformable convolution (BiRefNet's ``ASPPDeformable``)."""
    return any(isinstance(m, DeformConv2d) for m in model.modules())


@contextmanager
def deform_export_form(model: nn.Module, form: Form) -> Iterator[int]:
    """Every :class:`~sodkit.module.aspp.DeformConv2d` of ``model`` computes with ``form``
    inside the block (yields how many); torchvision's operator again after it."""
    modules = [m for m in model.modules() if isinstance(m, DeformConv2d)]
    for module in modules:
        module.export_form = FORMS[form]
    try:
        yield len(modules)
    finally:
        for module in modules:
            module.export_form = None
