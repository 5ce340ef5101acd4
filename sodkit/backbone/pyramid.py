"""A simple feature pyramid for plain ViTs, in the manner of ViTDet (Li et al., "Exploring Plain
Vision Transformer Backbones for Object Detection", ECCV 2022).

A plain ViT (DeiT, DINOv2/v3, EVA, SAM's image encoder) gives one map at its patch stride (14 or
16). Every sodkit decoder takes strides 4 to 32, so the last block's map is turned into one map
per stride: learned 2x up-convolutions for the finer strides (two for 4x, with a LayerNorm and a
GELU between them), the map itself at the patch stride, 2x max-pooling for the coarser ones
(the nearest power of two). With a patch of 14 the maps sit at strides 3.5, 7, 14 and 28: each
map is then resized to exactly ``ceil(input / stride)`` so that every decoder sees the strides
it declared.
Channels halve with each 2x up-convolution (ViTDet's ``dim / 4``, ``dim / 2``, ``dim``, ``dim``);
the decoders' own 1x1 laterals take them to their width.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from timm.layers import LayerNorm2d
from torch import Tensor, nn


def _scale_branch(channels: int, factor: float) -> tuple[nn.Module, int]:
    """The layers taking the patch-stride map ``factor`` times finer (>1) or coarser (<1): the
    nearest power of two (a patch of 14 to stride 4: two up-convolutions, to 3.5), and their
    output channels."""
    steps = round(math.log2(factor))
    if steps >= 2:
        half, quarter = max(channels // 2, 1), max(channels // 4, 1)
        layers = [nn.ConvTranspose2d(channels, half, 2, stride=2)]
        for _ in range(steps - 1):
            layers += [LayerNorm2d(half), nn.GELU(), nn.ConvTranspose2d(half, quarter, 2, stride=2)]
            half = quarter
        return nn.Sequential(*layers), quarter
    if steps == 1:
        half = max(channels // 2, 1)
        return nn.ConvTranspose2d(channels, half, 2, stride=2), half
    if steps == 0:
        return nn.Identity(), channels
    return nn.Sequential(*(nn.MaxPool2d(2, ceil_mode=True) for _ in range(-steps))), channels


class SimpleFeaturePyramid(nn.Module):
    """One ``(B, C, H / p, W / p)`` map -> maps at ``strides`` (finest first).

    Attributes:
        channels: channels of each output map.
        strides: the strides given (the decoders' ``STRIDES``).
    """

    def __init__(self, channels: int, patch: int, strides: Sequence[int]) -> None:
        super().__init__()
        self.patch = patch
        self.strides = [int(s) for s in strides]
        branches, self.channels = [], []
        for stride in self.strides:
            branch, out = _scale_branch(channels, patch / stride)
            branches.append(branch)
            self.channels.append(out)
        self.branches = nn.ModuleList(branches)

    def forward(self, feat: Tensor, image_size: Sequence[int]) -> list[Tensor]:
        outs = []
        for stride, branch in zip(self.strides, self.branches, strict=True):
            x = branch(feat)
            size = (math.ceil(image_size[0] / stride), math.ceil(image_size[1] / stride))
            if tuple(x.shape[-2:]) != size:
                x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
            outs.append(x)
        return outs


def fix_vit_input_size(vit: nn.Module, size: tuple[int, int], patch: int) -> None:
    """Resample a plain ViT's position embedding once for inputs of ``size`` (padded to whole
    patches), so that a traced graph holds no resampling: its bicubic antialiased interpolation
    has no ONNX operator. Outputs at that size are bit for bit unchanged (the same resampling,
    done ahead). ViT / EVA: timm's ``set_input_size``; SAM: its (1, H, W, C) embedding."""
    grid = (math.ceil(size[0] / patch), math.ceil(size[1] / patch))
    if hasattr(vit, "set_input_size"):
        vit.set_input_size(img_size=(grid[0] * patch, grid[1] * patch))
        return
    pos = getattr(vit, "pos_embed", None)
    if isinstance(pos, nn.Parameter) and pos.ndim == 4:
        from timm.layers import resample_abs_pos_embed_nhwc

        with torch.no_grad():
            vit.pos_embed = nn.Parameter(resample_abs_pos_embed_nhwc(pos, grid))
