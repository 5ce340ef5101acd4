"""The Kappa keys are Cohen's kappa, equal to ``sklearn.metrics.cohen_kappa_score`` (issue #25).

PySODMetrics' ``KappaHandler`` (which sodkit used to follow) has ``(tn + fn)(tn + tp)`` in its
chance agreement where Cohen's has ``(tn + fn)(tn + fp)``; with one full-frame GT in a dataset
its meanKappa came out at -16.2 and -41.4, outside kappa's [-1, 1].
"""

from __future__ import annotations

import warnings

import numpy as np
import py_sod_metrics as psm
import pytest
from sklearn.metrics import cohen_kappa_score

from sodkit.metrics import SODMetrics
from sodkit.metrics.curves import cohen_kappa
from sodkit.metrics.testing import realistic_pair


def per_threshold_sklearn(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """scikit-learn's kappa of ``pred >= t`` against ``gt > 128`` at thresholds 255..0 on the
    reference's normalised map (0 where it is undefined, NaN: both maps constant)."""
    norm = pred / 255.0
    if norm.max() != norm.min():
        norm = (norm - norm.min()) / (norm.max() - norm.min())
    levels = (norm * 255).astype(np.uint8).ravel()  # the references' 256 bins
    truth = (gt > 128).ravel()
    out = []
    for threshold in range(255, -1, -1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undefined (both maps constant): NaN
            score = cohen_kappa_score(truth, levels >= threshold, labels=[False, True])
        out.append(0.0 if np.isnan(score) else score)
    return np.array(out)


def kappa_curve(pairs) -> np.ndarray:
    metrics = SODMetrics(threads=1)
    for pred, gt in pairs:
        metrics.update(pred, gt)
    return metrics.compute()["kappa_curve"]


@pytest.mark.parametrize("case", ["realistic", "full GT", "empty GT", "one pixel"])
def test_kappa_curve_equals_scikit_learn(case):
    rng = np.random.default_rng(4)
    pred, gt = realistic_pair(rng, 30, 40)
    if case == "full GT":
        gt = np.full_like(gt, 255)
    elif case == "empty GT":
        gt = np.zeros_like(gt)
    elif case == "one pixel":
        gt = np.zeros_like(gt)
        gt[12, 7] = 255
    np.testing.assert_allclose(kappa_curve([(pred, gt)]), per_threshold_sklearn(pred, gt),
                               rtol=0, atol=1e-12)


def test_a_full_frame_gt_keeps_mean_kappa_within_its_range():
    """The issue's case: where PySODMetrics' typo goes far below -1, Cohen's kappa stays in
    [-1, 1], and the dataset's curve is the mean of scikit-learn's per image."""
    rng = np.random.default_rng(5)
    pairs = [realistic_pair(rng, 30, 40) for _ in range(3)]
    pairs.append((pairs[0][0], np.full((30, 40), 255, np.uint8)))
    ours = kappa_curve(pairs)
    expected = np.mean([per_threshold_sklearn(p, g) for p, g in pairs], axis=0)
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12)
    assert -1 <= ours.min() and ours.max() <= 1
    typo = psm.FmeasureV2({"Kappa": psm.KappaHandler(with_dynamic=True, with_adaptive=False)})
    for pred, gt in pairs:
        typo.step(pred, gt)
    assert typo.get_results()["Kappa"]["dynamic"].min() < -1  # why it is no oracle


def test_closed_form_against_scikit_learn_on_counts():
    rng = np.random.default_rng(6)
    counts = rng.integers(0, 500, size=(200, 4))
    counts[::7, 0] = 0
    counts[::11, 1:3] = 0
    ours = cohen_kappa(*counts.T)
    for (tp, fp, tn, fn), value in zip(counts.tolist(), ours, strict=True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = cohen_kappa_score([1, 0, 0, 1], [1, 1, 0, 0], labels=[0, 1],
                                         sample_weight=[tp, fp, tn, fn])
        assert value == pytest.approx(0.0 if np.isnan(expected) else expected, abs=1e-12)
