"""Size-invariant MAE and F-measure (Li et al., ICML 2024), as PySODMetrics 1.6 computes them.

A GT with several objects is scored object by object, so that a small object weighs as much
as a large one: each GT component of 50 pixels or more (4-connected; when none is that large,
the largest ones) is a target; a target's score is taken inside its bounding box, and an
image's score is the mean over its targets (siMAE also weighs the background outside every box).

Equal to ``SizeInvarianceMAE`` and ``SizeInvarianceFmeasureV2`` with a sample-based
``FmeasureHandler(beta=0.3)``, reduced as PySODMetrics' own tests reduce it: per image the mean
over targets of each target curve's max (``simaxFm``) and mean (``simeanFm``), averaged over
images; ``siadpFm`` the mean over targets of the adaptive F, averaged over images. (The
reference marks boxes as bits of a float64 map, which is exact up to 52 targets; here each box is
kept as such, so images with more targets get the intended boxes. A GT whose boxes cover the
whole image, where the reference gives NaN or stops, is scored on its targets alone.)
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .curves import BETA2, _divide

AREA_THRESHOLD = 50

Box = tuple[slice, slice]


def targets(fg: np.ndarray) -> list[Box]:
    """Bounding boxes of the scored GT components, in the reference's (raster label) order."""
    labels, count = ndimage.label(fg)  # 4-connected, labelled in raster order as skimage's
    if count == 0:
        return []
    areas = np.bincount(labels.ravel(), minlength=count + 1)[1:]
    boxes = ndimage.find_objects(labels)
    valid = np.flatnonzero(areas >= AREA_THRESHOLD)
    if len(valid) == 0:
        valid = np.flatnonzero(areas == areas.max())
    return [boxes[i] for i in valid]


def si_mae(norm: np.ndarray, fg: np.ndarray, boxes: list[Box]) -> float:
    """``SizeInvarianceMAE`` of one image.

    Where the boxes leave no background, its weight is 0 and its term is left out: the mean
    of the targets' errors (the reference gives NaN there, from 0 * 0 / 0, and stops with an
    AssertionError on a full GT)."""
    if not boxes:
        return float(np.abs(norm - fg).mean())
    background = np.ones(fg.shape, bool)
    for box in boxes:
        background[box] = False
    bg_area = np.count_nonzero(background)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.float64(bg_area) / (fg.size - bg_area)
        factor = 1 / (len(boxes) + ratio)
        error = np.abs(norm[background] - fg[background]).sum()
        mae = ratio * error / np.float64(bg_area) * factor if bg_area else np.float64(0)
        for box in boxes:
            area = norm[box].size
            mae += np.abs(norm[box] - fg[box]).sum() / area * factor
    return float(mae)


def _fmeasure(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    precision = _divide(tp, tp + fp)
    recall = _divide(tp, tp + fn)
    return _divide((BETA2 + 1) * precision * recall, BETA2 * precision + recall)


def _target_fmeasures(norm: np.ndarray, levels: np.ndarray, fg: np.ndarray,
                      box: Box) -> tuple[np.ndarray, float]:
    """One target's F curve (256 thresholds, 255 first) and adaptive F: the prediction and GT
    outside its box count as 0 / background, over the whole image."""
    inside, on_gt = levels[box], fg[box]
    outside = fg.size - inside.size
    positives = np.count_nonzero(on_gt)
    tp_hist = np.bincount(inside[on_gt], minlength=256)
    fp_hist = np.bincount(inside[~on_gt], minlength=256)
    fp_hist[0] += outside  # the zeros outside the box
    tp, fp = np.cumsum(tp_hist[::-1]), np.cumsum(fp_hist[::-1])
    curve = _fmeasure(tp, fp, positives - tp)
    masked = np.zeros(fg.shape)
    masked[box] = norm[box]
    threshold = min(2 * masked.mean(), 1)  # the reference's mean over the masked image
    above = norm[box] >= threshold
    tp_a = np.count_nonzero(above & on_gt)
    fp_a = np.count_nonzero(above & ~on_gt) + (outside if threshold <= 0 else 0)
    return curve, float(_fmeasure(np.array(tp_a), np.array(fp_a), np.array(positives - tp_a)))


def si_fmeasure(norm: np.ndarray, levels: np.ndarray, fg: np.ndarray,
                boxes: list[Box]) -> tuple[float, float, float]:
    """One image's (max, mean, adaptive) size-invariant F: means over its targets (the whole
    image is the one target of an empty GT)."""
    whole = (slice(0, fg.shape[0]), slice(0, fg.shape[1]))
    results = [_target_fmeasures(norm, levels, fg, box) for box in boxes or [whole]]
    curves = np.array([curve for curve, _ in results])
    adaptive = np.array([value for _, value in results])
    return (float(curves.max(axis=-1).mean()), float(curves.mean(axis=-1).mean()),
            float(np.mean(adaptive)))
