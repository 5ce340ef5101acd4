"""Convolution blocks and resizing helpers used by every decoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ConvBNAct(nn.Sequential):
    """Conv -> BatchNorm -> ReLU, 'same' padding for odd kernels.

    The conv has no bias by default (BatchNorm's shift makes it redundant); ``bias=True`` exists
    for the published networks whose code keeps one (MINet's and F3Net's ``nn.Conv2d`` defaults),
    so that their parameter counts and initial states match the originals.
    A ``nn.Sequential`` so that its parts keep the usual names (``0`` conv, ``1`` norm, ``2`` act)
    and a checkpointing wrapper can treat it as one block.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int = 3,
        stride: int = 1,
        dilation: int = 1,
        groups: int = 1,
        act: bool = True,
        bias: bool = False,
    ) -> None:
        padding = dilation * (kernel_size - 1) // 2
        layers: list[nn.Module] = [
            nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, dilation,
                      groups=groups, bias=bias),
            nn.BatchNorm2d(out_channels),
        ]
        if act:
            layers.append(nn.ReLU(inplace=True))
        super().__init__(*layers)


def resize_to(x: Tensor, size: tuple[int, int] | list[int], mode: str = "bilinear") -> Tensor:
    """Resize ``x`` (B, C, h, w) to exactly ``size`` (H, W); a no-op when it already matches.

    Decoders must resize to the target tensor's size instead of scaling by 2: an input side that
    is not a multiple of the backbone's stride gives feature maps with rounded-up sizes
    (e.g. 72 px -> 36, 18, 9, 5, 3), which a plain 2x upsampling would not match.
    """
    if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
        # keep the sizes symbolic (int() would freeze the export size into the graph); resizing
        # to the same size is the identity, so always resizing changes no value
        return F.interpolate(x, size=size, mode=mode,
                             align_corners=False if mode in ("bilinear", "bicubic") else None)
    size = (int(size[0]), int(size[1]))
    if tuple(x.shape[-2:]) == size:
        return x
    if mode in ("bilinear", "bicubic"):
        return F.interpolate(x, size=size, mode=mode, align_corners=False)
    return F.interpolate(x, size=size, mode=mode)


def pool_to(x: Tensor, size: tuple[int, int] | list[int]) -> Tensor:
    """2x average pooling of a finer map onto a coarser map's grid of ``size``.

    Exactly ``AvgPool2d(2, 2)`` when ``x`` is twice ``size`` (every even input side); for the
    rounded-up maps of odd sides (9 -> 5) the ceil-mode pooling gives the right size, and any
    other mismatch is resized, so interactions between adjacent levels never fail on a shape.
    """
    pooled = F.avg_pool2d(x, kernel_size=2, stride=2, ceil_mode=True)
    return resize_to(pooled, size)
