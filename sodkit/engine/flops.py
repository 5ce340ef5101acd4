"""FLOP counting that sees every operation of sodkit's networks, on any device.

``torch.utils.flop_counter.FlopCounterMode`` counts the ops it has a formula for (convolutions,
matrix products, CUDA's fused attention kernels) and nothing else. Two of BiRefNet's heavy ops
have none on torch 2.14:

- ``torchvision::deform_conv2d`` (its ASPP-deformable blocks): no formula on any device;
- ``aten::_scaled_dot_product_flash_attention_for_cpu``: the CPU kernel of
  ``F.scaled_dot_product_attention`` (timm's PVTv2 and ViT attention with ``fused_attn``);
  the CUDA kernels have formulas. timm's Swin v1 computes its attention with explicit matrix
  products (its fused path is experimental, off by default), which the counter sees.

:data:`EXTRA_FORMULAS` adds them, counted as the counter counts their neighbours: a multiply-add
is 2 FLOPs; the deformable convolution is the convolution of the same shapes (its sampled
columns times the kernel); the bilinear sampling and the modulation mask, like every
interpolation and elementwise op, count 0 (they would add 4 / C_out of it, 1.6% at BiRefNet's
256 channels). The CPU attention counts its two matrix products, ``torch.utils.flop_counter``'s
own ``sdpa_flop_count`` (``sdpa_backward_flop_count`` backward); softmax and the mask count 0,
as for the CUDA kernels. ``tests/test_flops.py`` checks both against hand counts.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count


def deform_conv2d_flops(input_shape: Any, weight_shape: Any, *args: Any, out_shape: Any = None,
                        **kwargs: Any) -> int:
    """``torchvision::deform_conv2d``: 2 x batch x output pixels x C_out x C_in/groups x k^2,
    the convolution of the same shapes (bias, sampling and mask: 0)."""
    batch = input_shape[0]
    return 2 * batch * math.prod(out_shape[2:]) * math.prod(weight_shape)


def cpu_attention_flops(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                        out_shape: Any = None, **kwargs: Any) -> int:
    """``aten::_scaled_dot_product_flash_attention_for_cpu``: Q K^T and (softmax) V."""
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def cpu_attention_backward_flops(grad_out_shape: Any, query_shape: Any, key_shape: Any,
                                 value_shape: Any, *args: Any, out_shape: Any = None,
                                 **kwargs: Any) -> int:
    """Its backward: the matrix products of the attention's gradients."""
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _extra_formulas() -> dict[Any, Any]:
    import torchvision  # noqa: F401  (registers torch.ops.torchvision)

    aten = torch.ops.aten
    return {
        torch.ops.torchvision.deform_conv2d: deform_conv2d_flops,
        aten._scaled_dot_product_flash_attention_for_cpu: cpu_attention_flops,
        aten._scaled_dot_product_flash_attention_for_cpu_backward: cpu_attention_backward_flops,
    }


def counter() -> FlopCounterMode:
    """A ``FlopCounterMode`` (not displaying) that also counts the ops above."""
    return FlopCounterMode(display=False, custom_mapping=_extra_formulas())


def flops_by_op(model: nn.Module, image: torch.Tensor) -> dict[str, int]:
    """FLOPs of one forward pass of ``model`` (eval mode, no autograd) by op name."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), counter() as mode:
            model(image)
    finally:
        model.train(was_training)
    return {str(op): int(n) for op, n in mode.get_flop_counts()["Global"].items()}
