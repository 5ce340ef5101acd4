"""Swin v1 windows as the Swin detection code pads them (the backbone of BiRefNet and of every
network built on the official "Swin-Transformer-Object-Detection" code).

Where a map is not a whole number of windows, the two codes differ. timm shifts the map, then
pads it right and below to whole windows; the detection code pads first, then shifts, so its
shifted windows wrap the padding around to the top and left, and it masks across the wrapped
regions with -inf (timm: -100). Networks trained with the detection code (BiRefNet's released
weights: its ``models/backbones/swin_v1.py``) need its order to give their outputs.
:func:`pad_windows_first` switches a timm Swin model's blocks to that order; their parameters
and names stay timm's. Build the model with ``always_partition=True``: the detection code keeps
every stage's window and shift even where the map is smaller than a window (timm shrinks them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.models.swin_transformer import SwinTransformerBlock, window_partition, window_reverse
from torch import Tensor, nn


def is_swin(name: str) -> bool:
    """A timm Swin v1 model name (``swin_tiny_patch4_window7_224``, ``swin_large_...``)."""
    return name.split(".")[0].startswith("swin_")


def shift_mask(height: int, width: int, window: tuple[int, int], shift: tuple[int, int],
               like: Tensor) -> Tensor:
    """(windows, N, N) attention mask of a padded ``height`` x ``width`` map shifted by
    ``shift``: 0 within a region, -inf across regions (the detection code's)."""
    regions = torch.zeros(1, height, width, 1, dtype=like.dtype, device=like.device)
    label = 0
    for rows in (slice(0, -window[0]), slice(-window[0], -shift[0]), slice(-shift[0], None)):
        for cols in (slice(0, -window[1]), slice(-window[1], -shift[1]),
                     slice(-shift[1], None)):
            regions[:, rows, cols, :] = label
            label += 1
    windows = window_partition(regions, window).reshape(-1, window[0] * window[1])
    diff = windows.unsqueeze(1) - windows.unsqueeze(2)
    return torch.zeros_like(diff).masked_fill(diff != 0, float("-inf"))


class PadFirstSwinBlock(SwinTransformerBlock):
    """timm's Swin block, padding to whole windows before the cyclic shift."""

    def _attn(self, x: Tensor) -> Tensor:
        _, height, width, channels = x.shape
        wh, ww = self.window_size
        x = F.pad(x, (0, 0, 0, (ww - width % ww) % ww, 0, (wh - height % wh) % wh))
        padded_h, padded_w = x.shape[1:3]
        shifted = any(self.shift_size)
        mask = None
        if shifted:
            x = torch.roll(x, shifts=(-self.shift_size[0], -self.shift_size[1]), dims=(1, 2))
            mask = shift_mask(padded_h, padded_w, self.window_size, self.shift_size, x)
        windows = window_partition(x, self.window_size).reshape(-1, wh * ww, channels)
        windows = self.attn(windows, mask=mask).reshape(-1, wh, ww, channels)
        x = window_reverse(windows, self.window_size, padded_h, padded_w)
        if shifted:
            x = torch.roll(x, shifts=self.shift_size, dims=(1, 2))
        return x[:, :height, :width, :].contiguous()


def pad_windows_first(model: nn.Module) -> int:
    """Switch every timm Swin v1 block of ``model`` to :class:`PadFirstSwinBlock`; returns how
    many (parameters, buffers and names unchanged)."""
    count = 0
    for module in model.modules():
        if type(module) is SwinTransformerBlock:
            module.__class__ = PadFirstSwinBlock
            count += 1
    return count
