"""Threshold metrics from exact pixel counts: F-measure, precision-recall, E-measure, and the
binary family of PySODMetrics' FmeasureV2, per image, at 256 thresholds or at the adaptive one.

Everything here is a function of integer counts per image: true and false positives at each
threshold (cumulative histograms of the truncated map, highest threshold first, as in the
reference), GT foreground and image size. The float64 formulas follow the reference's operation
order, so per-image values agree to the last bit or nearly.
"""

from __future__ import annotations

import numpy as np

from .prepare import EPS

BETA2 = 0.3  # beta^2 of the F-measure

# FmeasureV2's binary metrics: key stem -> curve key prefix
BINARY_METRICS = {
    "Precision": "precision",
    "Recall": "recall",
    "Specificity": "specificity",
    "Dice": "dice",
    "IoU": "iou",
    "BER": "ber",
    "Kappa": "kappa",
    "Accuracy": "accuracy",
}


def cumulative_counts(hist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TP, FP) at thresholds 255, 254, ..., 0 from (N, 2, 256) [background, GT] histograms."""
    tp = np.cumsum(hist[:, 1, ::-1], axis=1, dtype=np.int64)
    fp = np.cumsum(hist[:, 0, ::-1], axis=1, dtype=np.int64)
    return tp, fp


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` in float64, 0 where the denominator is 0 (FmeasureV2)."""
    denominator = np.asarray(denominator, dtype=np.float64)
    out = np.zeros(np.broadcast(numerator, denominator).shape)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def fmeasure(tp: np.ndarray, fp: np.ndarray, fg: np.ndarray) -> dict[str, np.ndarray]:
    """Precision, recall and F-measure (beta^2 = 0.3) of the reference's ``Fmeasure.cal_pr``.

    Args:
        tp, fp: (N, T) counts; fg: (N, 1) GT pixel counts.
    """
    predicted = tp + fp
    precision = tp / np.where(predicted == 0, 1, predicted)
    recall = tp / np.maximum(fg, 1)
    numerator = (1 + BETA2) * precision * recall
    denominator = np.where(numerator == 0, 1, BETA2 * precision + recall)
    return {"precision": precision, "recall": recall, "fm": numerator / denominator}


def adaptive_fmeasure(tp: np.ndarray, fp: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """The reference's ``cal_adaptive_fm``: 0 without overlap, else F of the binary map."""
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = tp / (tp + fp)
        recall = tp / fg
        score = (1 + BETA2) * precision * recall / (BETA2 * precision + recall)
    return np.where(tp == 0, 0.0, score)


def emeasure(tp: np.ndarray, fp: np.ndarray, fg: np.ndarray, size: np.ndarray) -> np.ndarray:
    """E-measure of binarised maps (Fan et al., IJCAI 2018) from counts.

    With a binary prediction the enhanced alignment matrix takes four values, one per
    (prediction, GT) pair, so the sum over pixels is four products of a value and a count.

    Args:
        tp, fp: (N, T) counts; fg, size: (N, 1) GT pixels and image pixels.
    """
    pred_fg = tp + fp
    pred_bg = size - pred_fg
    fn = fg - tp
    tn = pred_bg - fn
    pred_mean = pred_fg / size
    gt_mean = fg / size
    pred_values = (1 - pred_mean, 0 - pred_mean)
    gt_values = (1 - gt_mean, 0 - gt_mean)
    parts = ((0, 0, tp), (0, 1, fp), (1, 0, fn), (1, 1, tn))
    total = np.zeros(tp.shape)
    for i, (p, g, count) in enumerate(parts):
        a, b = pred_values[p], gt_values[g]
        align = 2 * (a * b) / (a * a + b * b + EPS)
        term = (align + 1) ** 2 / 4 * count
        total = term if i == 0 else total + term
    total = np.where(fg == 0, pred_bg, np.where(fg == size, pred_fg, total))
    return total / (size - 1 + EPS)


def cohen_kappa(tp: np.ndarray, fp: np.ndarray, tn: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """Cohen's kappa of a binary map against its GT, ``(p_o - p_e) / (1 - p_e)``, with the
    chance agreement ``p_e = [(tp + fp)(tp + fn) + (tn + fn)(tn + fp)] / n^2``; 0 where
    ``p_e = 1`` (both maps constant), as FmeasureV2 gives 0 for every zero denominator.

    Equal to ``sklearn.metrics.cohen_kappa_score`` (tested). PySODMetrics' ``KappaHandler``
    has ``(tn + fn)(tn + tp)`` in ``p_e``, a typo that sent kappa to -16 or -41 with one
    full-frame GT in a dataset; sodkit does not follow it. Computed in the closed form
    ``2 (tp tn - fn fp) / [(tp + fp)(fp + tn) + (tp + fn)(fn + tn)]`` on exact int64 counts (no
    cancellation in ``1 - p_e``; products exact for images of up to 2^31 pixels).
    """
    agree = 2 * (tp * tn - fn * fp)
    return _divide(agree, (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn))


def binary_metrics(
    tp: np.ndarray, fp: np.ndarray, fg: np.ndarray, size: np.ndarray
) -> dict[str, np.ndarray]:
    """FmeasureV2's handlers (zero where a denominator is zero), keyed like ``BINARY_METRICS``."""
    fn = fg - tp
    tn = size - fg - fp
    accuracy = _divide(tp + tn, tp + fp + tn + fn)
    return {
        "Precision": _divide(tp, tp + fp),
        "Recall": _divide(tp, tp + fn),
        "Specificity": _divide(tn, tn + fp),
        "Dice": _divide(2 * tp, tp + fn + tp + fp),
        "IoU": _divide(tp, tp + fp + fn),
        "BER": 1 - 0.5 * (_divide(tp, tp + fn) + _divide(tn, tn + fp)),
        "Kappa": cohen_kappa(tp, fp, tn, fn),
        "Accuracy": accuracy,
    }
