"""The alpha-matting metrics of the Deep Image Matting benchmark, per image, from uint8 mattes.

Definitions (Xu et al., CVPR 2017, Adobe's MATLAB ``evaluate.m``), as mmagic 1.2.0 computes them
(``mmagic/evaluation/metrics/{sad,matting_mse,gradient_error,connectivity_error}.py``): mmagic
follows the MATLAB code where Yaoyi Li's port (GCA-Matting ``utils/evaluate.py``) departs from
it (that port skips MATLAB's ``mat2gray`` before the gradient and may take the background as
the largest component). ``p`` and ``g`` are the prediction and the GT in [0, 1] (uint8 / 255),
``R`` the pixels measured: every pixel, or a trimap's unknown pixels (value 128; the
prediction is first set to the trimap's known values, 0 and 255, as mmagic requires).

* ``SAD`` = sum over R of ``|p - g|``, / 1000 (printed so in the papers: "SAD 30.5").
* ``MattingMSE`` = mean over R of ``(p - g)^2``, x 1000 (the papers' "MSE x 10^3").
* ``MAD`` = mean over R of ``|p - g|``, x 1000 (P3M-10k's and AM-2k's mean absolute difference).
* ``Grad`` = sum over R of ``(|grad p'| - |grad g'|)^2``, / 1000: ``x'`` is ``x`` min-max
  scaled to [0, 1] (0 where constant), the gradient a Gaussian-derivative filter (sigma 1.4,
  9 x 9, unit L2 norm, replicated borders).
* ``Conn`` = sum over R of ``|phi(p) - phi(g)|``, / 1000: for the thresholds 0.1, 0.2, ... 1,
  ``l`` is the threshold below the first at which a pixel leaves the largest 4-connected
  component of ``p >= t & g >= t`` (1 if it never does), ``phi(x) = 1 - d [d >= 0.15]`` with
  ``d = x - l``.

Why it is fast: SAD, MSE and MAD are integer sums of level differences; the Gaussian-derivative
kernel is separable (two 9-tap passes instead of an 81-tap filter, and on the trimap's unknown
region's bounding box only); the connectivity thresholds act on ``min(pred, gt)`` as uint8
levels, label (without OpenCV's statistics, 20x dearer for 4-connected components) only the
box that holds level >= 0.1, and ``phi`` is a table of (level, l) read at the measured pixels.
"""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np

SIGMA = 1.4  # the Gaussian's standard deviation (evaluate.m, compute_gradient_loss)
STEP = 0.1  # the connectivity thresholds' step (evaluate.m: compute_connectivity_error(.., 0.1))
KEYS = ("SAD", "MattingMSE", "MAD", "Grad", "Conn")
UNKNOWN = 128  # a trimap's unknown value; 0: background, 255: foreground


class EmptyRegion(ValueError):
    """A trimap with no unknown pixel: the matting metrics over it are undefined."""


@cache
def gaussian_derivative(sigma: float = SIGMA, epsilon: float = 1e-2
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The separable halves of evaluate.m's ``gaussgradient`` kernel ``hx[i, j] = G(i) dG(j)``
    (rows: G, columns: dG), its L2 norm folded into dG."""
    half = int(np.ceil(sigma * np.sqrt(-2 * np.log(np.sqrt(2 * np.pi) * sigma * epsilon))))
    x = np.arange(-half, half + 1, dtype=np.float64)
    gauss = np.exp(-x ** 2 / (2 * sigma ** 2)) / (sigma * np.sqrt(2 * np.pi))
    dgauss = -x * gauss / sigma ** 2
    norm = np.sqrt(np.sum(gauss ** 2) * np.sum(dgauss ** 2))  # ||outer(G, dG)||_2
    return gauss, dgauss / norm


@cache
def _threshold_levels(step: float = STEP) -> np.ndarray:
    """For each threshold ``t`` of ``np.arange(0, 1 + step, step)`` after the first, the least
    uint8 level ``v`` with ``v / 255 >= t`` (256: none), computed in the references' float64."""
    steps = np.arange(0, 1 + step, step)
    levels = np.arange(256, dtype=np.float64) / 255.0
    return np.array([int(np.searchsorted(levels, t, side="left")) for t in steps[1:]])


@cache
def _phi_table(step: float = STEP) -> np.ndarray:
    """``phi`` for every (uint8 level, round-down index): ``1 - d [d >= 0.15]``,
    ``d = level / 255 - l``, with ``l`` the thresholds below each and 1 for "never left"."""
    steps = np.arange(0, 1 + step, step)
    round_down = np.append(steps[:-1], 1.0)  # index i: l = steps[i]; the last: never left
    diff = (np.arange(256, dtype=np.float64) / 255.0)[:, None] - round_down[None, :]
    return 1 - diff * (diff >= 0.15)


def apply_trimap(pred: np.ndarray, trimap: np.ndarray | None
                 ) -> tuple[np.ndarray, np.ndarray | None]:
    """The prediction with the trimap's known values, and the measured region (a bool map;
    None: every pixel).

    Raises:
        EmptyRegion: the trimap has no unknown (128) pixel.
    """
    if trimap is None:
        return pred, None
    region = trimap == UNKNOWN
    if not region.any():
        raise EmptyRegion("the trimap has no unknown pixel (value 128): the matting metrics "
                          "over its unknown region are undefined")
    masked = pred.copy()
    masked[trimap == 0] = 0
    masked[trimap == 255] = 255
    return masked, region


def _measured(array: np.ndarray, region: np.ndarray | None) -> np.ndarray:
    """The region's values of a map, row-major (every value when ``region`` is None)."""
    return array.reshape(-1) if region is None else array[region]


def _box(region: np.ndarray | None, margin: int, shape: tuple[int, ...] = ()
         ) -> tuple[slice, slice]:
    """The region's bounding box grown by ``margin`` pixels (clipped to the image); the
    whole image (of ``shape``) for None."""
    if region is None:
        return slice(0, shape[0]), slice(0, shape[1])
    rows, cols = np.flatnonzero(region.any(axis=1)), np.flatnonzero(region.any(axis=0))
    height, width = region.shape
    return (slice(max(rows[0] - margin, 0), min(rows[-1] + margin + 1, height)),
            slice(max(cols[0] - margin, 0), min(cols[-1] + margin + 1, width)))


def _gradient_magnitude(level: np.ndarray, box: tuple[slice, slice], inside: np.ndarray | None
                        ) -> np.ndarray:
    """``|grad x'|`` at the flat indices ``inside`` of the box (None: all of it; ``x'``: the
    whole image min-max scaled to [0, 1])."""
    low, high = int(level.min()), int(level.max())
    if high == low:  # cv2.normalize's NORM_MINMAX: a constant map becomes 0
        return np.zeros(level[box].size if inside is None else inside.size)
    gauss, dgauss = gaussian_derivative()
    part = level[box].astype(np.float64)
    gx = cv2.sepFilter2D(part, cv2.CV_64F, dgauss, gauss, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.sepFilter2D(part, cv2.CV_64F, gauss, dgauss, borderType=cv2.BORDER_REPLICATE)
    gx, gy = gx.reshape(-1), gy.reshape(-1)
    if inside is not None:
        gx, gy = np.take(gx, inside), np.take(gy, inside)
    gx *= gx
    gy *= gy
    gx += gy
    np.sqrt(gx, out=gx)
    gx /= high - low
    return gx


def gradient_error(pred: np.ndarray, gt: np.ndarray, region: np.ndarray | None) -> float:
    """Grad (see the module docstring), / 1000."""
    half = len(gaussian_derivative()[0]) // 2
    box = _box(region, half, pred.shape)  # the filter reads `half` pixels around each one
    inside = None if region is None else np.flatnonzero(region[box])
    diff = _gradient_magnitude(pred, box, inside)
    diff -= _gradient_magnitude(gt, box, inside)
    return float(np.dot(diff, diff)) / 1000


def _largest_component(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """4-connected labels of a bool map and its largest component's label (-1: none). Ties go
    to the first in raster order, as MATLAB's bwconncomp and OpenCV number them."""
    count, labels = cv2.connectedComponents(mask.view(np.uint8), connectivity=4,
                                            ltype=cv2.CV_32S)
    if count < 2:
        return labels, -1
    sizes = np.bincount(labels.reshape(-1), minlength=count)
    return labels, 1 + int(np.argmax(sizes[1:]))


def round_down_index(pred: np.ndarray, gt: np.ndarray, region: np.ndarray | None
                     ) -> np.ndarray:
    """For each measured pixel (row-major), the index of its ``l`` in ``_phi_table``'s
    columns (uint8)."""
    levels = _threshold_levels()
    both = np.minimum(pred, gt)
    first = both >= levels[0]
    index = np.zeros(pred.shape, np.uint8)  # outside every intersection: l = 0
    if first.any():
        box = _box(first, 0)  # every intersection lies inside the first one's box
        local = index[box]
        local[...] = len(levels)  # never left: l = 1
        part = both[box]
        for i in range(len(levels) - 1, -1, -1):  # the smallest i a pixel is outside wins
            labels, largest = _largest_component(part >= levels[i])
            np.putmask(local, labels != largest, i)
    return _measured(index, region)


def connectivity_error(pred: np.ndarray, gt: np.ndarray, region: np.ndarray | None) -> float:
    """Conn (see the module docstring), / 1000."""
    table = _phi_table()
    columns = table.shape[1]
    index = round_down_index(pred, gt, region).astype(np.intp)
    phi_pred = np.take(table, _measured(pred, region).astype(np.intp) * columns + index)
    phi_pred -= np.take(table, _measured(gt, region).astype(np.intp) * columns + index)
    return float(np.abs(phi_pred, out=phi_pred).sum()) / 1000


def matting_errors(pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray | None = None
                   ) -> np.ndarray:
    """One image's ``KEYS`` (float64, the papers' units) from uint8 (H, W) prediction and GT,
    over the whole image or the ``trimap``'s unknown region.

    Raises:
        EmptyRegion: the trimap has no unknown pixel.
    """
    pred, region = apply_trimap(pred, trimap)
    diff = _measured(pred, region).astype(np.int32) - _measured(gt, region)
    count = diff.size
    absolute = int(np.abs(diff).sum())
    squared = int(np.dot(diff.astype(np.int64), diff))
    return np.array([absolute / 255 / 1000, squared / 255 ** 2 / count * 1000,
                     absolute / 255 / count * 1000, gradient_error(pred, gt, region),
                     connectivity_error(pred, gt, region)])
