"""MINet's interaction blocks (Pang et al., CVPR 2020), written from the paper's description.

- :class:`AIM` (aggregate interaction module): a level's map fused with its neighbours' maps
  (the finer one pooled down, the coarser one upsampled), each first transformed in its own
  branch at its own resolution, so every level sees context from one scale up and one down.
- :class:`SIM` (self-interaction module): one decoder block with two resolution branches
  (full and half) that exchange information twice before merging, which gives each decoder
  level multi-scale context at little cost.

Both work at one width (the decoder's) and resize to the target tensor's size, never by a fixed
factor, so equal-stride backbones (ViT) and odd input sizes work.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .conv import ConvBNAct, resize_to


def half(x: Tensor) -> Tensor:
    """2x average pooling that keeps at least one pixel (ceil mode: odd sizes round up)."""
    return F.avg_pool2d(x, kernel_size=2, stride=2, ceil_mode=True)


class AIM(nn.Module):
    """Fuse level ``i`` with its existing neighbours ``i - 1`` (finer) and ``i + 1`` (coarser).

    ``inputs`` lists the maps (all ``width`` channels), the level's own map first. Each gets its
    own 3x3 transform at its own resolution, is resized to the own map's size, and the
    concatenation is fused by a 3x3 conv; the own map is added back (residual) so a level
    without useful neighbours keeps its features.
    """

    def __init__(self, width: int, num_inputs: int) -> None:
        super().__init__()
        self.branches = nn.ModuleList(ConvBNAct(width, width, 3) for _ in range(num_inputs))
        self.fuse = ConvBNAct(num_inputs * width, width, 3, act=False)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        size = inputs[0].shape[-2:]
        mixed = [resize_to(branch(x), size) for branch, x in zip(self.branches, inputs,
                                                                  strict=True)]
        return F.relu(self.fuse(torch.cat(mixed, dim=1)) + inputs[0])


class SIM(nn.Module):
    """Two-branch decoder block: full-resolution and half-resolution paths (``width // 2``
    channels each) that exchange features, then merge back to ``width`` with a residual."""

    def __init__(self, width: int) -> None:
        super().__init__()
        mid = max(width // 2, 1)
        self.enter_high = ConvBNAct(width, mid, 3)
        self.enter_low = ConvBNAct(width, mid, 3)
        self.high_to_high = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.high_to_low = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.low_to_low = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.low_to_high = nn.Conv2d(mid, mid, 3, padding=1, bias=False)
        self.norm_high = nn.BatchNorm2d(mid)
        self.norm_low = nn.BatchNorm2d(mid)
        self.merge = ConvBNAct(mid, width, 3, act=False)

    def forward(self, x: Tensor) -> Tensor:
        high = self.enter_high(x)
        low = self.enter_low(half(x))
        size_high, size_low = high.shape[-2:], low.shape[-2:]
        new_high = self.high_to_high(high) + resize_to(self.low_to_high(low), size_high)
        new_low = self.low_to_low(low) + self.high_to_low(resize_to(high, size_low))
        high = F.relu(self.norm_high(new_high))
        low = F.relu(self.norm_low(new_low))
        return F.relu(self.merge(high + resize_to(low, size_high)) + x)
