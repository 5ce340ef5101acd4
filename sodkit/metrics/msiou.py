"""Multi-scale IoU (MSIoU, Ahmadzadeh et al.), as PySODMetrics 1.6's ``MSIoU`` computes it.

The edges of the binarised prediction and of the GT (Sobel, any response) are box-counted on
grids of 1, 2, 4, ..., 512 pixels (zero-padded at the top and left); at each scale the score is
``(|pred cells & GT cells| + 1) / (|GT cells| + 1)``, and the image's MSIoU is the area under
those ten scores (trapezoids over [0, 1]). Dynamic: at the 257 thresholds 0..256 of the
truncated map (ascending, as the reference); adaptive: at min(2 * mean, 1).

Only thresholds where the binary map changes (a present level + 1, and 0 and 256) are measured;
the others repeat the previous value, as in the reference. The edges are computed in integer
arithmetic and the grids as a pyramid of 2 x 2 ORs (the reference pads and reshapes the whole
image for each grid): the same cells, several times faster.
"""

from __future__ import annotations

import numpy as np

CELL_SIZES = tuple(int(c) for c in np.power(2, np.linspace(0, 9, num=10, dtype=int)))
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 2 renamed it


def edges(mask: np.ndarray) -> np.ndarray:
    """Pixels where the Sobel response of a bool mask (zero outside) is non-zero in either
    direction: ``scipy.ndimage.sobel``'s, which the reference uses, in integer arithmetic."""
    padded = np.pad(mask.astype(np.int16), 1)
    down = padded[2:, :] - padded[:-2, :]
    across = padded[:, 2:] - padded[:, :-2]
    rows = down[:, :-2] + 2 * down[:, 1:-1] + down[:, 2:]
    cols = across[:-2] + 2 * across[1:-1] + across[2:]
    return (rows != 0) | (cols != 0)


def _pad(size: int, cell: int) -> int:
    return (cell - size % cell) % cell


def pyramid(edge: np.ndarray) -> list[np.ndarray]:
    """Which cells of each grid (``CELL_SIZES``; the image zero-padded at the top and left to
    a multiple of the cell, as the reference) hold an edge.

    Each grid comes from the previous one by OR-ing 2 x 2 blocks: the padding of a grid of
    2c exceeds that of the grid of c by 0 or c, i.e. 0 or 1 cell of the finer grid.
    """
    h, w = edge.shape
    grids = [edge]
    for fine, cell in zip(CELL_SIZES, CELL_SIZES[1:], strict=False):
        grid = grids[-1]
        top = (_pad(h, cell) - _pad(h, fine)) // fine
        left = (_pad(w, cell) - _pad(w, fine)) // fine
        if top or left:
            grid = np.pad(grid, ((top, 0), (left, 0)))
        grids.append(grid[0::2, 0::2] | grid[1::2, 0::2] | grid[0::2, 1::2] | grid[1::2, 1::2])
    return grids


def _area(pred_edge: np.ndarray, gt_cells: list[np.ndarray], gt_counts: list) -> float:
    ratios = []
    for pred, gt, count in zip(pyramid(pred_edge), gt_cells, gt_counts, strict=True):
        ratios.append((np.count_nonzero(pred & gt) + 1) / (count + 1))
    return float(_trapezoid(y=ratios, dx=1 / (len(CELL_SIZES) - 1)))


def msiou(norm: np.ndarray, levels: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """One image's row: the dynamic curve (257 values, thresholds 0..256) and the adaptive
    value."""
    gt_edge = edges(fg)
    gt_cells = pyramid(gt_edge)
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
