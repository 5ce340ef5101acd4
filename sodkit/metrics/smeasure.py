"""S-measure (Fan et al., ICCV 2017, alpha = 0.5) from quadrant histograms, equal to PySODMetrics.

The object term needs the mean and standard deviation of the prediction on the GT and of
``1 - pred`` off it; the region term needs, in each quadrant around the GT centroid, the means,
variances and covariance of prediction and GT. All are functions of the per-quadrant (level, GT
bit) histogram. Sums come out in another order than the reference's, which moves results by
~1e-16, except at one discontinuity of the reference's SSIM: with a constant GT and a constant
prediction in a quadrant, it returns 1 if the computed variance is exactly 0 and 0 otherwise, and
whether numpy's mean of a constant block is exact depends on the value and the block's shape.
Those quadrants (never with values 0 or 1, which are always exact) are recomputed with numpy on
the block, as the reference does.
"""

from __future__ import annotations

import numpy as np

from .prepare import EPS

ALPHA = 0.5


def _object_part(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``2 m / (m^2 + 1 + std + EPS)`` of the pixels described by a (B, 256) level histogram."""
    size = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (weights * values).sum(axis=1) / size
        deviation = values - mean[:, None]
        variance = (weights * deviation * deviation).sum(axis=1) / (size - 1)
    std = np.where(size > 1, np.sqrt(np.where(size > 1, variance, 0.0)), 0.0)
    return 2 * mean / (mean * mean + 1 + std + EPS)


def object_score(hist: np.ndarray, table: np.ndarray, gt_mean: np.ndarray) -> np.ndarray:
    """Object term: prediction on the GT, and ``1 - pred`` on the background, weighted by area."""
    fg_score = _object_part(hist[:, :, 1], table) * gt_mean
    bg_score = _object_part(hist[:, :, 0], 1 - table) * (1 - gt_mean)
    return fg_score + bg_score


def _ssim(counts: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The reference's SSIM of every quadrant, from (B, 4, 256, 2) histograms and (B, 1, 256)
    level values; (B, 4), NaN for an empty quadrant."""
    both = counts.sum(axis=-1)
    size = both.sum(axis=-1)
    fg_size = counts[..., 1].sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = (both * table).sum(axis=-1) / size
        y = fg_size / size
        denominator = size - 1 + EPS
        dx = table - x[..., None]
        sigma_x = (both * dx * dx).sum(axis=-1) / denominator
        sigma_y = (fg_size * (1 - y) ** 2 + (size - fg_size) * y**2) / denominator
        on_gt = (counts[..., 1] * dx).sum(axis=-1)
        off_gt = (counts[..., 0] * dx).sum(axis=-1)
        sigma_xy = (on_gt * (1 - y) - off_gt * y) / denominator
        alpha = 4 * x * y * sigma_xy
        beta = (x * x + y * y) * (sigma_x + sigma_y)
        score = np.where(alpha != 0, alpha / (beta + EPS), np.where(beta == 0, 1.0, 0.0))
    return np.where(size > 0, score, np.nan)


def _ssim_on_block(pred: np.ndarray, fg: np.ndarray) -> float:
    """The reference's SSIM computed with numpy on the pixels themselves (rare fallback)."""
    denominator = pred.size - 1 + EPS
    x, y = pred.mean(), fg.mean()
    sigma_x = np.sum((pred - x) ** 2) / denominator
    sigma_y = np.sum((fg - y) ** 2) / denominator
    sigma_xy = np.sum((pred - x) * (fg - y)) / denominator
    alpha = 4 * x * y * sigma_xy
    beta = (x**2 + y**2) * (sigma_x + sigma_y)
    if alpha != 0:
        return float(alpha / (beta + EPS))
    return 1.0 if beta == 0 else 0.0


def _needs_exact(counts: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(B, 4) quadrants whose GT and prediction are both constant, at a value other than 0, 1."""
    levels = counts.sum(axis=-1) > 0
    size = counts.sum(axis=(-2, -1))
    fg_size = counts[..., 1].sum(axis=-1)
    single = levels.sum(axis=-1) == 1
    value = np.take_along_axis(table, levels.argmax(axis=-1), axis=-1)
    constant_gt = (fg_size == 0) | (fg_size == size)
    return (size > 0) & constant_gt & single & (value != 0) & (value != 1)


def region_score(
    counts: np.ndarray,
    table: np.ndarray,
    split: tuple[np.ndarray, np.ndarray],
    pred: np.ndarray,
    fg: np.ndarray,
    active: np.ndarray,
) -> np.ndarray:
    """Region term: area-weighted SSIM of the four quadrants around the GT centroid.

    Args:
        counts: (B, 4, 256, 2) quadrant histograms.
        table: (B, 256) normalised value per level.
        split: (split_row, split_col), each (B,) int, 1-based centroid (quadrant boundary).
        pred, fg: (B, H, W) uint8 maps and bool GTs, read only by the rare exact fallback.
        active: (B,) bool, images whose result is used (the others skip the fallback).
    """
    height, width = fg.shape[1:]
    area = height * width
    split_row, split_col = split
    weights = [split_col * split_row / area, split_row * (width - split_col) / area,
               (height - split_row) * split_col / area]
    weights.append(1 - weights[0] - weights[1] - weights[2])
    scores = _ssim(counts, table[:, None, :])
    exact = _needs_exact(counts, table) & active[:, None]
    for b, quadrant in zip(*np.nonzero(exact), strict=True):
        rows = slice(0, split_row[b]) if quadrant < 2 else slice(split_row[b], height)
        cols = slice(0, split_col[b]) if quadrant % 2 == 0 else slice(split_col[b], width)
        image = table[b][pred[b]]
        scores[b, quadrant] = _ssim_on_block(image[rows, cols], fg[b][rows, cols])
    total = scores[:, 0] * weights[0]
    for quadrant in range(1, 4):
        total = total + scores[:, quadrant] * weights[quadrant]
    return total


def smeasure(
    counts: np.ndarray,
    table: np.ndarray,
    split: tuple[np.ndarray, np.ndarray],
    pred: np.ndarray,
    fg: np.ndarray,
) -> np.ndarray:
    """S-measure per image; NaN where the reference gives NaN (GT centroid on the last row or
    column, which leaves a quadrant empty).

    Args:
        counts: (B, 4, 256, 2) quadrant histograms; table: (B, 256) normalised level values;
        split: 1-based centroid rows and columns; pred, fg: the maps, for rare exact fallbacks.
    """
    counts = counts.astype(np.float64)  # exact (< 2^53); saves a conversion in every product
    hist = counts.sum(axis=1)
    size = hist.sum(axis=(1, 2))
    gt_mean = hist[:, :, 1].sum(axis=1) / size
    pred_mean = (hist.sum(axis=2) * table).sum(axis=1) / size
    mixed = (gt_mean > 0) & (gt_mean < 1)
    with np.errstate(invalid="ignore", divide="ignore"):  # unmixed images are not used below
        obj = object_score(hist, table, gt_mean)
        reg = region_score(counts, table, split, pred, fg, mixed)
    structure = np.maximum(0, obj * ALPHA + reg * (1 - ALPHA))
    return np.where(mixed, structure, np.where(gt_mean == 0, 1 - pred_mean, pred_mean))
