"""Input checks and the per-image normalisation of PySODMetrics, as 256-entry lookup tables.

PySODMetrics turns a uint8 prediction into ``pred / 255`` and, when the map is not constant,
min-max normalises it: ``(p - min) / (max - min)``. Every pixel of value ``v`` becomes the same
float64, so one table per image, computed with the same float64 operations in the same order,
reproduces the normalised map bit for bit without ever building it. The thresholds of the curves
come from the truncated map ``trunc(255 * p)``, which is again a table.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

# MATLAB's eps (what PySODMetrics uses everywhere it guards a division)
EPS = float(np.spacing(1))

# Relative band in which the mean computed from histograms cannot decide ``p >= 2 * mean``: the
# reference's pairwise sum and ours differ by a few ulps at most (~1e-15); 1e-10 is generous.
_AMBIGUITY = 1e-10


def is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch (``import sodkit.metrics`` stays
    light: a tensor cannot exist unless torch was imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def as_uint8_batch(x: Any, name: str) -> np.ndarray | torch.Tensor:
    """A uint8 (H, W) or (B, H, W) array or tensor -> an owned (B, H, W) uint8 batch.

    The caller may reuse its buffer, so the data is copied. CPU data becomes a numpy array (the
    CPU backend); CUDA tensors stay tensors on their device.
    """
    if is_tensor(x):
        if x.dtype != sys.modules["torch"].uint8:
            raise TypeError(f"{name} must be uint8 (the map a PNG holds), got {x.dtype}")
        x = x.detach()
        batch = x.clone().contiguous() if x.is_cuda else np.array(x.cpu().numpy(), order="C")
    elif isinstance(x, np.ndarray):
        if x.dtype != np.uint8:
            raise TypeError(f"{name} must be uint8 (the map a PNG holds), got {x.dtype}")
        batch = np.array(x, order="C")
    else:
        raise TypeError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")
    if batch.ndim == 2:
        batch = batch[None]
    if batch.ndim != 3:
        raise ValueError(f"{name} must be (H, W) or (B, H, W), got shape {tuple(batch.shape)}")
    return batch


def as_index_list(index: int | Sequence[int] | None, count: int, start: int) -> list[int]:
    """Dataset indices for ``count`` new images; ``None`` continues from ``start``."""
    if index is None:
        return list(range(start, start + count))
    if isinstance(index, (int, np.integer)):
        index = [int(index)]
    elif is_tensor(index):
        index = index.reshape(-1).tolist()
    indices = [int(i) for i in index]
    if len(indices) != count:
        raise ValueError(f"got {len(indices)} indices for {count} images")
    return indices


def level_tables(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Per image, the float64 value of each uint8 level after PySODMetrics' normalisation.

    The division is done in float64 in the reference's order,
    ``(v/255 - lo/255) / (hi/255 - lo/255)``, or ``v/255`` for a constant map.

    Args:
        low, high: (B,) lowest and highest uint8 level present in each image.

    Returns:
        (B, 256) float64; entries of absent levels are computed all the same and never used.
    """
    low = np.asarray(low) / 255
    high = np.asarray(high) / 255
    levels = np.arange(256) / 255
    span = (high - low)[:, None]
    constant = span == 0
    scaled = (levels[None, :] - low[:, None]) / np.where(constant, 1.0, span)
    return np.where(constant, levels[None, :], scaled)


def minmax_tables(level_counts: np.ndarray) -> np.ndarray:
    """:func:`level_tables` with the extremes read from (B, 256) level histograms."""
    present = level_counts > 0
    return level_tables(present.argmax(axis=1), 255 - present[:, ::-1].argmax(axis=1))


def truncated_levels(table: np.ndarray) -> np.ndarray:
    """``trunc(255 * p)`` per level: the 0..255 bin PySODMetrics' curves put a pixel in.

    Levels absent from an image can map outside [0, 1]; they are clipped (they count nothing).
    """
    return np.clip(table * 255, 0, 255).astype(np.int64)


def adaptive_thresholds(
    table: np.ndarray, level_counts: np.ndarray, pred: np.ndarray
) -> np.ndarray:
    """``min(2 * mean(p), 1)`` per image, bit-exact where it decides a comparison.

    The mean is computed from the level histogram. It can differ from the reference's pairwise
    sum in the last bits; that only matters when a present level lies within a hair of the
    threshold, so such images (rare: constant or hand-made maps) recompute the mean exactly as
    the reference does, with numpy on the normalised map.

    Args:
        table: (B, 256) float64 normalised value per level.
        level_counts: (B, 256) int64 pixels per level.
        pred: (B, H, W) uint8 maps, used only for the rare exact recomputation.
    """
    pixels = level_counts.sum(axis=1)
    mean = (level_counts * table).sum(axis=1) / pixels
    thresholds = np.minimum(2 * mean, 1.0)
    low = np.minimum(2 * mean * (1 - _AMBIGUITY), 1.0)
    high = np.minimum(2 * mean * (1 + _AMBIGUITY), 1.0)
    near = (table >= low[:, None]) & (table < high[:, None]) & (level_counts > 0)
    for b in np.flatnonzero(near.any(axis=1)):
        image = table[b][pred[b]]
        thresholds[b] = min(2 * image.mean(), 1.0)
    return thresholds
