"""Confidence intervals and paired comparisons of dataset-level metrics, by bootstrap over images.

No SOD toolkit says whether a difference between two methods is real; sodkit keeps each image's
sufficient statistics (``records``), so it can. Every dataset-level number is a function of the
*column means* of a per-image matrix: the three scalars, each image's 256-threshold F, E and
FmeasureV2 curves with its adaptive values, and the optional families' rows; ``max`` / ``mean``
are then taken on the averaged curve. A bootstrap resample of the images is therefore a weight
vector (how often each image was drawn: multinomial counts), and the resampled metric is the
same reduction of ``weights @ matrix / n``. So maxF and maxE, which live on averaged curves, get
intervals exactly as MAE does, and 1,000 resamples cost a few matrix products rather than 1,000
re-evaluations.

- Interval: the percentile bootstrap, ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of
  the resampled values (default 95%, 1,000 resamples, seed 0: the same numbers on every run).
- Paired comparison with a baseline: every method is resampled with the *same* weights (the
  same images drawn), the difference ``method - baseline`` is taken per resample; its interval,
  and the two-sided p-value ``min(1, 2 (1 + min(#{d <= 0}, #{d >= 0})) / (B + 1))``, say whether
  the difference is distinguishable from 0 on these images. It speaks of the images sampled,
  not of other datasets.

A family's summary must be a function of its rows' column means (every family's is: column
means, or max / mean of an averaged curve); it is called on the averaged row of each resample.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .curves import BINARY_METRICS, binary_metrics
from .families import FAMILIES
from .records import SCALARS, Records
from .results import METRIC_KEYS, _Counts, summarize

RESAMPLES = 1000
LEVEL = 0.95
CHUNK = 1 << 22  # resampled weights per matrix product (32 MB of float64)


@dataclass
class Columns:
    """A set's per-image matrix and how each result key reduces its column means.

    Attributes:
        matrix: (N, C) float64, a row per image in dataset-index order.
        keys: ``(key, how, start, stop)``; ``how`` is ``"value"`` (one column), ``"max"`` or
            ``"mean"`` (of the columns' averaged curve).
        families: ``(name, start, stop)`` of each optional family's rows.
    """

    matrix: np.ndarray
    keys: list[tuple[str, str, int, int]]
    families: list[tuple[str, int, int]]

    @classmethod
    def of(cls, records: Records) -> Columns:
        counts = _Counts.of(records)
        records = counts.records
        blocks, keys, start = [], [], 0

        def add(block: np.ndarray) -> tuple[int, int]:
            nonlocal start
            blocks.append(block)
            start += block.shape[1]
            return start - block.shape[1], start

        for i, name in enumerate(SCALARS):
            keys.append((name, "value", *add(records.scalars[:, i:i + 1])))
        tp_a, fp_a = records.adaptive[:, :1], records.adaptive[:, 1:]
        curves = {"Fm": (counts.pr["fm"], counts.adaptive_fm),
                  "Em": (counts.em, counts.adaptive_em)}
        dynamic = binary_metrics(counts.tp, counts.fp, counts.fg, counts.size)
        adaptive = binary_metrics(tp_a, fp_a, counts.fg, counts.size)
        curves.update({stem: (dynamic[stem], adaptive[stem]) for stem in BINARY_METRICS})
        for stem, (curve, adp) in curves.items():
            first, last = add(curve)
            keys += [(f"max{stem}", "max", first, last), (f"mean{stem}", "mean", first, last)]
            keys.append((f"adp{stem}", "value", *add(adp)))
        order = {key: i for i, key in enumerate(METRIC_KEYS)}
        keys.sort(key=lambda entry: order[entry[0]])
        families = [(name, *add(records.extra[name])) for name in FAMILIES
                    if name in records.extra]
        return cls(np.ascontiguousarray(np.concatenate(blocks, axis=1)), keys, families)

    def grouped(self, groups: np.ndarray) -> Columns:
        """The same keys over groups (videos, co-salient groups: ``sodkit eval --groups``),
        each group weighing the same, as the dataset's numbers are taken: a row per group, the
        column means of its images (a value key is then the mean of the groups' values, a curve
        key the max / mean of the mean of their curves), and each family's keys as the group's
        own summary (averaged over groups, as ``_eval_groups.average_groups`` does).

        Args:
            groups: the group label of each row (dataset-index order).
        """
        labels = list(dict.fromkeys(np.asarray(groups).tolist()))
        members = [np.flatnonzero(np.asarray(groups) == label) for label in labels]
        means = np.stack([self.matrix[rows].mean(axis=0) for rows in members])
        blocks, keys = [means], list(self.keys)
        start = means.shape[1]
        for name, a, b in self.families:
            summaries = [FAMILIES[name].summarize(row[None]) for row in means[:, a:b]]
            for key in FAMILIES[name].keys:
                blocks.append(np.array([[summary[key]] for summary in summaries]))
                keys.append((key, "value", start, start + 1))
                start += 1
        return Columns(np.ascontiguousarray(np.concatenate(blocks, axis=1)), keys, [])

    def names(self) -> list[str]:
        """Every result key, standard first, then the families' in registry order."""
        return [key for key, *_ in self.keys] + [
            key for name, *_ in self.families for key in FAMILIES[name].keys]

    def reduce(self, means: np.ndarray) -> np.ndarray:
        """(B, C) averaged rows -> (B, K) values of :meth:`names`' keys."""
        out = [means[:, a] if how == "value" else getattr(means[:, a:b], how)(axis=1)
               for _, how, a, b in self.keys]
        for name, a, b in self.families:
            summaries = [FAMILIES[name].summarize(row[None]) for row in means[:, a:b]]
            out += [np.array([s[key] for s in summaries]) for key in FAMILIES[name].keys]
        return np.stack(out, axis=1) if out else np.zeros((len(means), 0))

    def values(self, weights: np.ndarray) -> np.ndarray:
        """(B, K) metric values of B weightings of the images ((B, N) counts, each summing to
        N; a row of ones is the data set itself)."""
        total = weights.sum(axis=1, keepdims=True)
        return self.reduce(weights @ self.matrix / total)


def resample_weights(images: int, resamples: int, seed: int) -> Iterator[np.ndarray]:
    """(b, N) float64 multinomial counts of ``resamples`` bootstrap draws of N images, in chunks
    that bound memory; the same seed gives the same draws (for every method alike)."""
    rng = np.random.default_rng(seed)
    step = max(1, min(resamples, CHUNK // max(images, 1)))
    for first in range(0, resamples, step):
        count = min(step, resamples - first)
        drawn = rng.integers(0, images, size=(count, images))
        drawn += images * np.arange(count)[:, None]
        yield np.bincount(drawn.ravel(), minlength=count * images).reshape(
            count, images).astype(np.float64)


def resampled_values(records: Records, resamples: int = RESAMPLES, seed: int = 0,
                     groups: np.ndarray | None = None) -> tuple[list[str], np.ndarray]:
    """The result keys and their (resamples, K) bootstrap values for one method's records;
    with ``groups`` (a label per record, in dataset-index order), groups are resampled."""
    columns = Columns.of(records)
    if groups is not None:
        columns = columns.grouped(groups)
    count = len(columns.matrix)
    values = [columns.values(w) for w in resample_weights(count, resamples, seed)]
    return columns.names(), np.concatenate(values)


def _interval(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return low, high


def _plain(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def bootstrap(records: Mapping[str, Records], resamples: int = RESAMPLES, seed: int = 0,
              level: float = LEVEL, baseline: str | None = None,
              groups: np.ndarray | None = None,
              points: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Intervals of every method's metrics on one data set, and paired comparisons with
    ``baseline`` (a key of ``records``): a JSON-ready dict (NaN and infinities as None).

    Every method must hold the same images (the same dataset indices), as ``sodkit eval``'s do.
    ``groups``: each image's group (dataset-index order) when the dataset's numbers are
    averages over groups; the groups are then what is resampled (a cluster bootstrap), and
    ``points`` gives each method's numbers (default: ``summarize`` of its records).

    Raises:
        ValueError: no images, methods on different images, or an unknown baseline.
    """
    methods = list(records)
    index = records[methods[0]].sorted().index
    if any(not np.array_equal(records[m].sorted().index, index) for m in methods):
        raise ValueError("a paired bootstrap needs every method measured on the same images")
    if baseline is not None and baseline not in records:
        raise ValueError(f"baseline {baseline!r} is none of the methods {', '.join(methods)}")
    drawn = {m: resampled_values(records[m], resamples, seed, groups) for m in methods}
    over = "images" if groups is None else "groups"
    out: dict[str, Any] = {"images": len(index), "resamples": resamples, "seed": seed,
                           "level": level, "method": f"percentile bootstrap over {over}",
                           "intervals": {}, "baseline": baseline, "comparisons": {}}
    if groups is not None:
        out["groups"] = len(set(np.asarray(groups).tolist()))
    points = points or {m: summarize(records[m]) for m in methods}
    for method, (keys, values) in drawn.items():
        low, high = _interval(values, level)
        out["intervals"][method] = {
            key: {"value": _plain(points[method][key]), "low": _plain(lo), "high": _plain(hi)}
            for key, lo, hi in zip(keys, low, high, strict=True)}
    if baseline is not None:
        keys, base = drawn[baseline]
        for method in methods:
            if method != baseline:
                out["comparisons"][method] = _compare(
                    keys, drawn[method][1] - base, points[method], points[baseline], level)
    return out


def _compare(keys: list[str], differences: np.ndarray, ours: Mapping[str, Any],
             theirs: Mapping[str, Any], level: float) -> dict[str, dict[str, Any]]:
    """Per key: the observed difference, its interval, the p-value and whether the interval
    excludes 0."""
    low, high = _interval(differences, level)
    below = (differences <= 0).sum(axis=0)
    above = (differences >= 0).sum(axis=0)
    count = len(differences)
    p = np.minimum(1.0, 2 * (1 + np.minimum(below, above)) / (count + 1))
    result = {}
    for k, key in enumerate(keys):
        finite = np.isfinite(low[k]) and np.isfinite(high[k])
        result[key] = {"difference": _plain(ours[key] - theirs[key]), "low": _plain(low[k]),
                       "high": _plain(high[k]), "p": float(p[k]) if finite else None,
                       "excludes_zero": bool(finite and (low[k] > 0 or high[k] < 0))}
    return result
