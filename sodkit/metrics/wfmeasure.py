"""Weighted F-measure (Margolin et al., CVPR 2014) equal to PySODMetrics, without its costly EDT.

The reference calls SciPy's Euclidean distance transform with nearest-pixel indices on the whole
image (~40% of all its metric time). Only two things are needed from it:

* the distance of every background pixel to the GT, for the importance weight
  ``B = 2 - exp(log(0.5) / 5 * D)``. OpenCV's precise EDT is exact up to float32 rounding for
  distances below ~886 px, and squared distances on a grid are integers, so ``round(d32 ** 2)``
  is the exact squared distance (images with larger distances use SciPy's EDT) and ``B`` is a
  table lookup.
* the nearest GT pixel of the background pixels that the 7x7 Gaussian around a GT pixel reads,
  i.e. background pixels within 3 pixels (Chebyshev) of the GT. Their nearest GT pixel is at most
  sqrt(18) away, so it is the first GT pixel found among the 60 offsets of squared length <= 18,
  scanned in the order SciPy's feature transform breaks ties: distance, then column, then row.
  (Checked by brute force against SciPy in the tests.)

Everything else is the reference formula; the 7x7 convolution runs only on the GT's bounding box.
"""

from __future__ import annotations

import functools

import cv2
import numpy as np

from .prepare import EPS, level_tables
from .workspace import scratch

_SIGMA = 5.0
_RADIUS = 3  # the 7x7 kernel of fspecial('gaussian', 7, 5)
_PAD = 4  # offsets of squared length <= 18 stay within 4 pixels
_REACH = 18  # squared distance of the farthest pixel of a 7x7 window from its centre
_MAX_FAST_SQUARED = 1 << 19  # OpenCV's EDT is exact below 886^2 + 1; keep a margin


def gaussian_kernel() -> np.ndarray:
    """MATLAB's ``fspecial('gaussian', [7 7], 5)``: exp(-(x^2 + y^2) / 2 sigma^2), normalised
    (the reference's kernel; kept to test that :func:`gaussian_kernel_1d` factors it)."""
    offsets = np.arange(-_RADIUS, _RADIUS + 1, dtype=np.float64)
    squared = offsets[:, None] ** 2 + offsets[None, :] ** 2
    kernel = np.exp(-squared / (2 * _SIGMA * _SIGMA))
    kernel[kernel < np.finfo(np.float64).eps * kernel.max()] = 0
    return kernel / kernel.sum()


@functools.lru_cache(maxsize=1)
def gaussian_kernel_1d() -> np.ndarray:
    """The 1-D factor of :func:`gaussian_kernel` (the 2-D kernel is its outer product up to
    ~1e-18); filtering rows then columns costs 14 instead of 49 products per pixel and moves
    results by ~1e-16."""
    offsets = np.arange(-_RADIUS, _RADIUS + 1, dtype=np.float64)
    kernel = np.exp(-offsets * offsets / (2 * _SIGMA * _SIGMA))
    return kernel / kernel.sum()


@functools.lru_cache(maxsize=1)
def _candidate_offsets() -> tuple[np.ndarray, np.ndarray]:
    """Per squared length k <= 18, the 8 (dy, dx) offsets of that length in SciPy's tie order.

    SciPy's feature transform keeps, among equally near GT pixels, the one with the smallest
    column, then the smallest row. Rows of the table are padded by repeating their first offset
    (a repeat can never come before the original in a first-hit search).
    """
    span = np.arange(-4, 5)
    dy, dx = (a.ravel() for a in np.meshgrid(span, span, indexing="ij"))
    length = dy * dy + dx * dx
    table_y = np.zeros((_REACH + 1, 8), np.int64)
    table_x = np.zeros((_REACH + 1, 8), np.int64)
    for k in range(1, _REACH + 1):
        ys, xs = dy[length == k], dx[length == k]
        order = np.lexsort((ys, xs))
        ys, xs = ys[order], xs[order]
        if ys.size:
            table_y[k] = np.concatenate([ys, np.full(8 - ys.size, ys[0])])
            table_x[k] = np.concatenate([xs, np.full(8 - xs.size, xs[0])])
    return table_y, table_x


@functools.lru_cache(maxsize=256)
def _candidate_offsets_flat(row_length: int) -> np.ndarray:
    """:func:`_candidate_offsets` as flat offsets in an array of rows of ``row_length``."""
    table_y, table_x = _candidate_offsets()
    return table_y * row_length + table_x


class _WeightTable:
    """``2 - exp(log(0.5) / 5 * sqrt(k))`` for integer squared distances k, grown on demand.

    Entry 0 is set to 0 instead of 1: only GT pixels are at distance 0, and they must not count
    in the false-positive sum, so a dot product over the whole image needs no mask.
    """

    def __init__(self) -> None:
        self.values = np.empty(0)

    def __call__(self, squared: np.ndarray, top: int) -> np.ndarray:
        values = self.values  # one read: another thread may swap in a larger table meanwhile
        if top >= values.size:
            size = max(top + 1, 2 * values.size, 1 << 16)
            values = 2 - np.exp(np.log(0.5) / 5 * np.sqrt(np.arange(size, dtype=np.float64)))
            values[0] = 0.0
            self.values = values  # published only once complete
        out = scratch("weights", squared.shape, np.float64)
        return np.take(values, squared, mode="clip", out=out)  # no bounds checks: 3x faster


_weights = _WeightTable()


def _squared_distances(bg: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact squared distance from each pixel to the nearest GT pixel, and an upper bound.

    OpenCV's precise EDT matches SciPy's exactly (after squaring and rounding) for squared
    distances below 784,997 = 886^2 + 1, its first miss (on narrow images); every image whose
    largest squared distance is below 2^19 (distances under 724 px) takes that route, others
    take SciPy's. Squaring in float32 errs by < 0.1 there, so rounding recovers the integer.
    """
    d32 = cv2.distanceTransform(bg, cv2.DIST_L2, cv2.DIST_MASK_PRECISE,
                                dst=scratch("distance", bg.shape, np.float32))
    top = float(d32.max(initial=0.0))
    if top * top < _MAX_FAST_SQUARED:
        out = scratch("squared", bg.shape, np.int32)
        squared = cv2.multiply(d32, d32, dst=out, dtype=cv2.CV_32S)  # rounds to nearest
        return squared, int(top * top + 0.5) + 1
    from scipy.ndimage import distance_transform_edt  # exactness over speed

    squared = np.rint(distance_transform_edt(bg) ** 2).astype(np.int64)
    return squared, int(squared.max(initial=0)) + 1


def nearest_gt(fg: np.ndarray, flat: np.ndarray, squared: np.ndarray) -> np.ndarray:
    """Flat index of the GT pixel SciPy's ``distance_transform_edt(return_indices=True)`` picks
    for each background pixel ``flat`` of ``fg``, given its exact squared distance (<= 18).

    Args:
        fg: (H, W) bool or 0/1 uint8 GT, with at least 4 pixels of background margin around
            every pixel asked.
        flat: (N,) flat indices of background pixels.
        squared: (N,) their exact squared distances to the GT, each in 1..18.
    """
    candidates = flat[:, None] + _candidate_offsets_flat(fg.shape[1])[squared]
    first = fg.ravel()[candidates].argmax(axis=1)
    return np.take_along_axis(candidates, first[:, None], axis=1)[:, 0]


def _gt_box(fg: np.ndarray) -> tuple[slice, slice]:
    """The GT's bounding box grown by the kernel radius, clipped to the image."""
    x, y, w, h = cv2.boundingRect(fg.view(np.uint8))
    height, width = fg.shape
    return (slice(max(y - _RADIUS, 0), min(y + h + _RADIUS, height)),
            slice(max(x - _RADIUS, 0), min(x + w + _RADIUS, width)))


def _zero_border(array: np.ndarray) -> np.ndarray:
    array[:_PAD] = array[-_PAD:] = 0
    array[:, :_PAD] = array[:, -_PAD:] = 0
    return array


def _errors_on_gt(
    pred: np.ndarray, fg: np.ndarray, squared: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(EA, E, GT) on the GT's box: the reference's ``EA``, ``E`` and ``gt`` there.

    E = 1 - pred on the GT. EA is the 7x7 Gaussian of Et: E on the GT and, on background pixels,
    E at their nearest GT pixel. Only the GT's bounding box grown by 3 pixels matters. It is
    padded by 4 zeros, so that neighbour offsets stay inside the array and pixels beyond the
    image read 0, as with the reference's constant border. Background pixels farther than 3 from
    the GT are never read at a GT pixel, so they keep whatever value is cheapest.
    """
    rows, cols = _gt_box(fg)
    fg_box = fg[rows, cols]
    shape = (fg_box.shape[0] + 2 * _PAD, fg_box.shape[1] + 2 * _PAD)
    inner = (slice(_PAD, -_PAD), slice(_PAD, -_PAD))
    fg_pad = _zero_border(scratch("fg_pad", shape, np.uint8))
    fg_pad[inner] = fg_box
    error = _zero_border(scratch("error", shape, np.float64))
    np.subtract(1.0, pred[rows, cols], out=error[inner])
    if squared is not None:
        band = cv2.dilate(fg_pad, np.ones((2 * _RADIUS + 1, 2 * _RADIUS + 1), np.uint8),
                          dst=scratch("band", shape, np.uint8))
        _zero_border(band)  # beyond the image, where the box was clipped
        band -= fg_pad
        flat = np.flatnonzero(band)
        ys, xs = np.divmod(flat, shape[1])
        image_flat = (ys + rows.start - _PAD) * fg.shape[1] + (xs + cols.start - _PAD)
        nearest = nearest_gt(fg_pad, flat, squared.ravel()[image_flat])
        error.ravel()[flat] = error.ravel()[nearest]
    kernel = gaussian_kernel_1d()
    smoothed = cv2.sepFilter2D(error, -1, kernel, kernel, dst=scratch("smooth", shape, np.float64),
                               borderType=cv2.BORDER_CONSTANT)
    return smoothed[inner], error[inner], fg_box


def weighted_fmeasure(pred: np.ndarray, fg: np.ndarray) -> float:
    """Weighted F-measure (beta = 1) of one image, equal to PySODMetrics' ``WeightedFmeasure``.

    Args:
        pred: (H, W) float64 normalised prediction (as the reference sees it).
        fg: (H, W) bool GT (``gt > 128``).

    Returns:
        The score; 0 for an empty GT, as in the reference.
    """
    gt_pixels = int(np.count_nonzero(fg))
    if gt_pixels == 0:
        return 0.0
    squared = None
    fp_weighted = 0.0  # sum over the background of E * B, with E = pred there
    if gt_pixels < fg.size:
        bg = np.logical_not(fg, out=scratch("bg", fg.shape, bool))
        squared, top = _squared_distances(bg.view(np.uint8))
        fp_weighted = float(np.einsum("i,i->", pred.ravel(), _weights(squared.ravel(), top)))
    ea, e, gt_box = _errors_on_gt(pred, fg, squared)
    smaller = np.minimum(ea, e, out=ea)  # MIN_E_EA (B = 1 on the GT)
    sum_gt = np.sum(smaller, where=gt_box)
    tp_weighted = gt_pixels - sum_gt
    recall = 1 - sum_gt / gt_pixels
    precision = tp_weighted / (tp_weighted + fp_weighted + EPS)
    return float(2 * recall * precision / (recall + precision + EPS))


def weighted_fmeasure_uint8(pred: np.ndarray, fg: np.ndarray) -> float:
    """:func:`weighted_fmeasure` of a uint8 prediction, normalised as the reference does.

    Self-contained (no histogram needed), so images can be measured in worker threads while the
    batch's histograms are computed.
    """
    low, high = cv2.minMaxLoc(pred)[:2]
    table = level_tables(np.array([low]), np.array([high]))[0]
    return weighted_fmeasure(cv2.LUT(pred, table, dst=scratch("pred", pred.shape, np.float64)), fg)
