"""The oracle: PySODMetrics' own classes, producing the same keys as ``SODMetrics.compute``."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterable

import numpy as np
import py_sod_metrics as psm

from sodkit.metrics import CURVE_KEYS, METRIC_KEYS


@functools.cache
def sklearn_kappa(tp: int, fp: int, tn: int, fn: int) -> float:
    """``sklearn.metrics.cohen_kappa_score`` of a binary map with these counts against its GT
    (the four kinds of pixel, weighted by their counts); 0 where scikit-learn finds no chance
    disagreement (both maps constant: NaN there), FmeasureV2's value for a zero denominator."""
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 0 / 0 of a constant pair
        score = cohen_kappa_score([1, 0, 0, 1], [1, 1, 0, 0], labels=[0, 1],
                                  sample_weight=[tp, fp, tn, fn])
    return 0.0 if np.isnan(score) else float(score)


class SklearnKappaHandler(psm.KappaHandler):
    """Cohen's kappa by scikit-learn, in FmeasureV2's handler interface: the oracle for sodkit's
    Kappa keys. PySODMetrics' own ``KappaHandler`` has ``(tn + fn)(tn + tp)`` in its chance
    agreement where Cohen's kappa has ``(tn + fn)(tn + fp)`` (README, Metrics), so it is no
    oracle; every other key still is PySODMetrics'."""

    def __call__(self, tp, fp, tn, fn):
        return np.vectorize(lambda *c: sklearn_kappa(*map(int, c)), otypes=[np.float64])(
            tp, fp, tn, fn)


BINARY_HANDLERS = {
    "Precision": psm.PrecisionHandler,
    "Recall": psm.RecallHandler,
    "Specificity": psm.SpecificityHandler,
    "Dice": psm.DICEHandler,
    "IoU": psm.IOUHandler,
    "BER": psm.BERHandler,
    "Kappa": SklearnKappaHandler,
    "Accuracy": psm.OverallAccuracyHandler,
}


def reference_metrics(pairs: Iterable[tuple[np.ndarray, np.ndarray]]) -> dict[str, object]:
    """Every metric and curve of ``SODMetrics`` computed by PySODMetrics, one ``step`` per pair."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Fmeasure's deprecation, empty-slice means
        mae, sm, em, wfm, fm = (psm.MAE(), psm.Smeasure(), psm.Emeasure(),
                                psm.WeightedFmeasure(), psm.Fmeasure())
        v2 = psm.FmeasureV2({name: handler(with_dynamic=True, with_adaptive=True)
                             for name, handler in BINARY_HANDLERS.items()})
        for pred, gt in pairs:
            for metric in (mae, sm, em, wfm, fm, v2):
                metric.step(pred, gt)
        f_res, e_res = fm.get_results(), em.get_results()["em"]
    fm_curve, em_curve = f_res["fm"]["curve"], e_res["curve"]
    out: dict[str, object] = {
        "MAE": mae.get_results()["mae"], "Smeasure": sm.get_results()["sm"],
        "wFmeasure": wfm.get_results()["wfm"],
        "maxFm": fm_curve.max(), "meanFm": fm_curve.mean(), "adpFm": f_res["fm"]["adp"],
        "maxEm": em_curve.max(), "meanEm": em_curve.mean(), "adpEm": e_res["adp"],
        "precision_curve": f_res["pr"]["p"], "recall_curve": f_res["pr"]["r"],
        "fm_curve": fm_curve, "em_curve": em_curve,
    }
    for name, res in v2.get_results().items():
        out[f"max{name}"] = res["dynamic"].max()
        out[f"mean{name}"] = res["dynamic"].mean()
        out[f"adp{name}"] = res["adaptive"]
        if name not in ("Precision", "Recall"):
            out[f"{name.lower()}_curve"] = res["dynamic"]
    assert set(out) == set(METRIC_KEYS) | set(CURVE_KEYS)
    return out


def largest_difference(ours: dict[str, object], ref: dict[str, object]) -> dict[str, float]:
    """Largest absolute difference per key (NaN on both sides counts as equal)."""
    diffs = {}
    for key, expected in ref.items():
        a = np.asarray(ours[key], dtype=np.float64)
        b = np.asarray(expected, dtype=np.float64)
        same_nan = np.isnan(a) & np.isnan(b)
        diffs[key] = float(np.max(np.where(same_nan, 0.0, np.abs(a - b)), initial=0.0))
    return diffs


def assert_matches_reference(ours: dict[str, object], ref: dict[str, object],
                             tol: float = 1e-6) -> None:
    diffs = largest_difference(ours, ref)
    bad = {k: v for k, v in diffs.items() if not v <= tol}
    assert not bad, f"differences above {tol}: {bad}"


def soft_gt(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A GT with many non-binary values, including 128 and 129 around the binarisation cut."""
    gt = rng.choice(np.array([0, 20, 127, 128, 129, 200, 255], np.uint8), size=(height, width))
    gt[: height // 2] = 0
    return gt
