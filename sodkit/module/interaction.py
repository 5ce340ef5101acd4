"""MINet's interaction modules (Pang et al., "Multi-scale Interactive Network for Salient Object
Detection", CVPR 2020), built to match the authors' released MINet_Res50 module by module.

- :class:`AIMLevel`: one level of the aggregate interaction module. The level's own backbone map
  and its adjacent levels' maps (the finer one and/or the coarser one) each enter a branch of
  ``min(their channels)`` width; in a first exchange every branch takes in its adjacent branches
  (the finer one average-pooled 2x, the coarser one nearest-upsampled 2x, each followed by its
  own 3x3 conv at the target resolution); in a second exchange only the level's own branch takes
  in its neighbours; a last 3x3 conv maps it to the output width, and a 1x1 projection of the
  level's input is added (residual). The branch width is the narrowest input's, so at ResNet-50's
  deep levels the branches are 512 and 1024 channels wide: that is where most of MINet-R50's
  parameters and FLOPs sit (139M of its 162M parameters).
- :class:`AIM`: one :class:`AIMLevel` per backbone level.
- :class:`SIM`: the self-interaction module of each decoder level: a full-resolution branch
  (``high`` channels) and a half-resolution branch (``low`` channels) that exchange twice and end
  in the full-resolution branch, plus the block's input (residual, no activation after it).

Every conv that is followed by a BatchNorm keeps its bias, as ``nn.Conv2d``'s default does in the
original code, so parameter counts match to the parameter. Resampling goes to the target map's
size (:func:`pool_to`, :func:`resize_to`), which equals the original's fixed 2x factors at sizes
that are multiples of 32 and still works for other input sizes.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from .conv import ConvBNAct, pool_to, resize_to


def _conv3x3(in_channels: int, out_channels: int) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, 3, padding=1)


def _to_size(x: Tensor, source: int, target: int, size: tuple[int, int], up_mode: str) -> Tensor:
    """Branch ``source``'s map moved onto branch ``target``'s grid (branches fine to coarse)."""
    if source < target:
        return pool_to(x, size)
    if source > target:
        return resize_to(x, size, mode=up_mode)
    return x


class Exchange(nn.Module):
    """One exchange stage between adjacent branches (branch 0 is the finest).

    Each branch in ``targets`` sums a 3x3 conv of every adjacent branch's map (and of its own),
    moved to its resolution first, then applies BatchNorm and ReLU.
    """

    def __init__(self, width: int, branches: int, targets: list[int], up_mode: str) -> None:
        super().__init__()
        self.targets, self.up_mode = targets, up_mode
        self.sources = {t: [s for s in (t - 1, t, t + 1) if 0 <= s < branches] for t in targets}
        self.convs = nn.ModuleDict({f"{s}to{t}": _conv3x3(width, width)
                                    for t in targets for s in self.sources[t]})
        self.norms = nn.ModuleDict({str(t): nn.BatchNorm2d(width) for t in targets})

    def forward(self, maps: list[Tensor]) -> list[Tensor]:
        out = []
        for t in self.targets:
            size = maps[t].shape[-2:]
            total = None
            for s in self.sources[t]:
                moved = self.convs[f"{s}to{t}"](_to_size(maps[s], s, t, size, self.up_mode))
                total = moved if total is None else total + moved
            out.append(F.relu(self.norms[str(t)](total), inplace=True))
        return out


class AIMLevel(nn.Module):
    """Level ``own`` of the AIM, fusing ``in_channels`` (its inputs, finest first).

    Args:
        in_channels: channels of the inputs, finest first: two (the level and one neighbour) or
            three (finer, own, coarser).
        own: index of the level's own map in the inputs.
        out_channels: output width (MINet-R50: 64).
    """

    def __init__(self, in_channels: list[int], own: int, out_channels: int) -> None:
        super().__init__()
        if not 2 <= len(in_channels) <= 3 or not 0 <= own < len(in_channels):
            raise ValueError(f"an AIM level takes 2 or 3 inputs, got {in_channels} (own {own})")
        width = min(in_channels)
        self.own = own
        self.enter = nn.ModuleList(ConvBNAct(c, width, 3, bias=True) for c in in_channels)
        branches = len(in_channels)
        self.exchange1 = Exchange(width, branches, list(range(branches)), up_mode="nearest")
        self.exchange2 = Exchange(width, branches, [own], up_mode="nearest")
        self.out = ConvBNAct(width, out_channels, 3, act=False, bias=True)
        self.identity = nn.Conv2d(in_channels[own], out_channels, 1)

    def forward(self, *inputs: Tensor) -> Tensor:
        maps = [enter(x) for enter, x in zip(self.enter, inputs, strict=True)]
        maps = self.exchange1(maps)
        fused = self.exchange2(maps)[0]
        return F.relu(self.out(fused) + self.identity(inputs[self.own]))


class AIM(nn.ModuleList):
    """One :class:`AIMLevel` per backbone level: level ``i`` fuses levels ``i - 1 .. i + 1``.

    ``AIM(channels, width)[i](*maps)`` takes :meth:`inputs` ``(feats, i)``; one module per level
    (rather than one call for all) lets the network checkpoint each level on its own.
    """

    def __init__(self, channels: list[int], out_channels: int) -> None:
        if len(channels) < 2:
            raise ValueError(f"MINet's AIM needs at least 2 backbone levels, got {channels}")
        super().__init__(AIMLevel([channels[j] for j in AIM.neighbours(i, len(channels))],
                                  min(i, 1), out_channels) for i in range(len(channels)))

    @staticmethod
    def neighbours(i: int, levels: int) -> list[int]:
        """The levels that level ``i`` fuses, finest first (itself included)."""
        return [j for j in (i - 1, i, i + 1) if 0 <= j < levels]


class SIM(nn.Module):
    """Self-interaction module: ``high``-channel full-resolution and ``low``-channel
    half-resolution branches, two exchanges, the full-resolution branch plus the input out.

    Eight 3x3 convs as in the original: into the branches (2), the first exchange (4), back into
    the full-resolution branch (2).
    """

    def __init__(self, high: int, low: int) -> None:
        super().__init__()
        self.h_in, self.l_in = _conv3x3(high, high), _conv3x3(high, low)
        self.h_h, self.h_l = _conv3x3(high, high), _conv3x3(high, low)
        self.l_h, self.l_l = _conv3x3(low, high), _conv3x3(low, low)
        self.h_out, self.l_out = _conv3x3(high, high), _conv3x3(low, high)
        self.norms = nn.ModuleList(nn.BatchNorm2d(c) for c in (high, low, high, low, high))

    def forward(self, x: Tensor) -> Tensor:
        size = x.shape[-2:]
        half = F.avg_pool2d(x, kernel_size=2, stride=2, ceil_mode=True)
        bn_h0, bn_l0, bn_h1, bn_l1, bn_h2 = self.norms
        high = F.relu(bn_h0(self.h_in(x)))
        low = F.relu(bn_l0(self.l_in(half)))
        low_size = low.shape[-2:]
        high, low = (
            F.relu(bn_h1(self.h_h(high) + self.l_h(resize_to(low, size)))),
            F.relu(bn_l1(self.l_l(low) + self.h_l(pool_to(high, low_size)))),
        )
        high = F.relu(bn_h2(self.h_out(high) + self.l_out(resize_to(low, size))))
        return high + x
