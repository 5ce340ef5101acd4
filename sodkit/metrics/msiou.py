"""Multi-scale IoU (MSIoU, Ahmadzadeh et al.), as PySODMetrics 1.6's ``MSIoU`` computes it.

The edges of the binarised prediction and of the GT (Sobel, any response) are box-counted on
grids of 1, 2, 4, ..., 512 pixels (zero-padded at the top and left); at each scale the score is
``(|pred cells & GT cells| + 1) / (|GT cells| + 1)``, and the image's MSIoU is the area under
those ten scores (trapezoids over [0, 1]). Dynamic: at the 257 thresholds 0..256 of the
truncated map (ascending, as the reference); adaptive: at min(2 * mean, 1).

Only thresholds where the binary map changes (a present level + 1, and 0 and 256) are measured;
the others repeat the previous value, as in the reference.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

CELL_SIZES = tuple(int(c) for c in np.power(2, np.linspace(0, 9, num=10, dtype=int)))
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it


def edges(mask: np.ndarray) -> np.ndarray:
    """Pixels with a non-zero Sobel response of a bool mask (in the reference's bool
    arithmetic: scipy casts each pass to the input's dtype)."""
    sx = ndimage.sobel(mask, axis=0, mode="constant")
    sy = ndimage.sobel(mask, axis=1, mode="constant")
    return sx | sy


def shrink(edge: np.ndarray, cell: int) -> np.ndarray:
    """Which ``cell`` x ``cell`` grid cells hold an edge (the image zero-padded at the top and
    left to a multiple of the cell)."""
    if cell == 1:
        return edge
    h, w = edge.shape
    pad_h, pad_w = (cell - h % cell) % cell, (cell - w % cell) % cell
    if pad_h or pad_w:
        edge = np.pad(edge, ((pad_h, 0), (pad_w, 0)))
    h, w = edge.shape
    return edge.reshape(h // cell, cell, w // cell, cell).any(axis=(1, 3))


def _area(pred_edge: np.ndarray, gt_cells: list[np.ndarray], gt_counts: list) -> float:
    ratios = []
    for cell, gt, count in zip(CELL_SIZES, gt_cells, gt_counts, strict=True):
        pred = shrink(pred_edge, cell)
        ratios.append((np.count_nonzero(pred & gt) + 1) / (count + 1))
    return float(_trapezoid(y=ratios, dx=1 / (len(CELL_SIZES) - 1)))


def msiou(norm: np.ndarray, levels: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """One image's row: the dynamic curve (257 values, thresholds 0..256) and the adaptive
    value."""
    gt_edge = edges(fg)
    gt_cells = [shrink(gt_edge, cell) for cell in CELL_SIZES]
    # The reference counts the GT's cells as a sum of float16 ones (its edge maps' dtype),
    # which rounds above 2048 cells: counted the same way, for the same ratios.
    gt_counts = [cells.astype(np.float16).sum() for cells in gt_cells]
    present = np.zeros(258, bool)
    present[np.unique(levels).astype(np.int64) + 1] = True
    present[[0, 256]] = True
    row = np.empty(258)
    for threshold in range(257):
        if present[threshold]:
            row[threshold] = _area(edges(levels >= threshold), gt_cells, gt_counts)
        else:
            row[threshold] = row[threshold - 1]
    row[257] = _area(edges(norm >= min(2 * norm.mean(), 1)), gt_cells, gt_counts)
    return row
