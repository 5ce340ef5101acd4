"""Atrous spatial pyramid pooling, plain and deformable, as BiRefNet builds them (its
``models/modules/aspp.py`` and ``deform_conv.py``): parallel branches on one map, an image-level
pooled branch, concatenated and fused by a 1x1 ConvBNReLU, then dropout (p = 0.5).

The deformable convolution is :func:`torchvision.ops.deform_conv2d` with learned offsets and a
modulation mask (``2 * sigmoid``); its offset and mask convolutions start at zero, so a fresh
block samples the regular grid with a mask of 1 (a plain convolution).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.ops import deform_conv2d

from .conv import ConvBNAct

BRANCH_CHANNELS = 256  # every branch's width in BiRefNet (its in_channelster)


class DeformConv2d(nn.Module):
    """Modulated deformable convolution (DCNv2), stride 1, 'same' padding for odd kernels.

    ``offset`` (2 per kernel tap) and ``modulator`` (1 per tap) are convolutions of the input;
    ``weight`` is the sampled convolution's kernel (no bias, as BiRefNet's ASPP uses it).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        taps = kernel_size * kernel_size
        self.padding = kernel_size // 2
        self.offset = nn.Conv2d(in_channels, 2 * taps, kernel_size, padding=self.padding)
        self.modulator = nn.Conv2d(in_channels, taps, kernel_size, padding=self.padding)
        for conv in (self.offset, self.modulator):
            nn.init.zeros_(conv.weight)
            nn.init.zeros_(conv.bias)
        # initialised as nn.Conv2d initialises its weight (kaiming uniform, a = sqrt(5))
        weight = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False).weight
        self.weight = nn.Parameter(weight.detach().clone())
        # set during an ONNX export only (sodkit.module.deform_export): an exportable form
        self.export_form: Callable[..., Tensor] | None = None

    def forward(self, x: Tensor) -> Tensor:
        offset = self.offset(x)
        mask = 2.0 * torch.sigmoid(self.modulator(x))
        if self.export_form is not None:
            return self.export_form(x, offset, self.weight, mask, self.padding)
        if x.dtype in (torch.float16, torch.bfloat16):
            # torchvision has no bf16 kernel (nor any half one on CPU); its CUDA autocast
            # wrapper runs the op in float32 and casts back to the input's dtype: the same here,
            # on every device (bf16 training on CPU included)
            with torch.autocast(x.device.type, enabled=False):
                out = deform_conv2d(x.float(), offset.float(), self.weight.float(),
                                    padding=self.padding, mask=mask.float())
            return out.to(x.dtype)
        return deform_conv2d(x, offset, self.weight, padding=self.padding, mask=mask)


def _deform_branch(in_channels: int, kernel_size: int) -> nn.Sequential:
    return nn.Sequential(DeformConv2d(in_channels, BRANCH_CHANNELS, kernel_size),
                         nn.BatchNorm2d(BRANCH_CHANNELS), nn.ReLU(inplace=True))


class _PyramidPooling(nn.Module):
    """Branches + image pooling + fusion; subclasses build ``branches``."""

    branches: nn.ModuleList

    def __init__(self, in_channels: int, out_channels: int | None, branches: int) -> None:
        super().__init__()
        out_channels = out_channels or in_channels
        self.pool = ConvBNAct(in_channels, BRANCH_CHANNELS, 1)  # after global average pooling
        self.fuse = ConvBNAct(BRANCH_CHANNELS * (branches + 1), out_channels, 1)
        self.dropout = nn.Dropout(0.5)

    def forward(self, x: Tensor) -> Tensor:
        maps = [branch(x) for branch in self.branches]
        pooled = self.pool(F.adaptive_avg_pool2d(x, 1))
        # a 1x1 map resized bilinearly with aligned corners: copied to every pixel
        maps.append(F.interpolate(pooled, size=maps[0].shape[-2:], mode="bilinear",
                                  align_corners=True))
        return self.dropout(self.fuse(torch.cat(maps, dim=1)))


class ASPP(_PyramidPooling):
    """DeepLab's ASPP at output stride 16: a 1x1 branch and 3x3 branches dilated 6, 12, 18."""

    DILATIONS = (6, 12, 18)

    def __init__(self, in_channels: int, out_channels: int | None = None) -> None:
        super().__init__(in_channels, out_channels, 1 + len(self.DILATIONS))
        self.branches = nn.ModuleList(
            [ConvBNAct(in_channels, BRANCH_CHANNELS, 1)]
            + [ConvBNAct(in_channels, BRANCH_CHANNELS, 3, dilation=d) for d in self.DILATIONS])


class ASPPDeformable(_PyramidPooling):
    """BiRefNet's ASPPDeformable: deformable branches of kernel 1 and then 1, 3 and 7."""

    KERNELS = (1, 3, 7)

    def __init__(self, in_channels: int, out_channels: int | None = None) -> None:
        super().__init__(in_channels, out_channels, 1 + len(self.KERNELS))
        self.branches = nn.ModuleList(_deform_branch(in_channels, k)
                                      for k in (1, *self.KERNELS))
