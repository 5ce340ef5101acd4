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
  same images drawn), the difference ``method - baseline`` is taken per resample; its interval
  and a two-sided p-value say whether the difference is distinguishable from 0 on these images.
  The p-value is read off the same quantiles as the interval (:func:`p_values`): the smallest
  ``1 - level`` whose percentile interval still holds 0, i.e. twice the share of the resampled
  differences beyond 0 on the far side, at least ``2 / (B + 1)``. So the interval excludes 0 if
  and only if ``p < 1 - level`` (``*`` and ``p < 0.05`` always agree; a count with a ``+ 1``
  correction disagreed near the edge: ``[-0.0629, -0.0002]`` beside p = 0.0519). It speaks of
  the images sampled, not of other datasets.
- Size: fewer than :data:`MIN_SAMPLES` images (groups) are refused: a resample of a few images
  is nearly always the same few, the percentile interval is too narrow (a simulation of means
  covered the truth 50% of the time at 2 images, 70-80% at 3-5, 85-93% at 10, 90-96% from 30,
  instead of 95%), and one image gives a zero-width interval with p = 2 / (B + 1). Memory is
  bounded by the request, not by luck: the weights and averaged rows are made in chunks of
  :data:`CHUNK` values, whatever the image and column counts, and the resampled values kept for
  the intervals (resamples x keys, of one method and the baseline at a time) must fit
  :data:`MAX_KEPT_BYTES`.

A family's summary must be a function of its rows' column means (every family's is: column
means, or max / mean of an averaged curve); it is called on the averaged row of each resample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .curves import BINARY_METRICS, binary_metrics
from .families import FAMILIES
from .records import SCALARS, Records
from .results import METRIC_KEYS, _Counts, summarize

RESAMPLES = 1000
LEVEL = 0.95
CHUNK = 1 << 22  # values of one resampled block: weights or averaged rows (32 MB of float64)
MIN_SAMPLES = 10  # images (or groups) a bootstrap needs; see the module docstring
MAX_KEPT_BYTES = 1 << 30  # resampled values held at once: a method's and the baseline's


def key_count(families: Iterable[str]) -> int:
    """How many result keys a bootstrap of records with these families resamples."""
    return len(METRIC_KEYS) + sum(len(FAMILIES[name].keys) for name in families)


def kept_bytes(resamples: int, methods: int, keys: int) -> int:
    """Bytes of the resampled values a bootstrap holds at once (float64): one method's and,
    with a baseline (two methods or more), the baseline's."""
    return 8 * resamples * min(methods, 2) * keys


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
        own summary (averaged over groups, as ``sodkit.evaluation.groups.average_groups`` does).

        Args:
            groups: the group label of each row (dataset-index order).
        """
        labels = list(dict.fromkeys(np.asarray(groups).tolist()))
        members = [np.flatnonzero(np.asarray(groups) == label) for label in labels]
        means = np.stack([self.matrix[rows].mean(axis=0) for rows in members])
        blocks, keys, families = [means], list(self.keys), []
        start = means.shape[1]
        for name, a, b in self.families:
            summaries = [FAMILIES[name].summarize(row[None]) for row in means[:, a:b]]
            if FAMILIES[name].sequence:  # a video without a frame pair has no value: left
                # out of the mean over groups (average_groups), as a (value, 1) / (0, 0) row
                value = np.array([summaries[g][FAMILIES[name].keys[0]] for g in range(
                    len(summaries))])
                counts = ~np.isnan(value)
                blocks.append(np.stack([np.where(counts, value, 0.0), counts * 1.0], axis=1))
                families.append((name, start, start + 2))
                start += 2
                continue
            for key in FAMILIES[name].keys:
                blocks.append(np.array([[summary[key]] for summary in summaries]))
                keys.append((key, "value", start, start + 1))
                start += 1
        return Columns(np.ascontiguousarray(np.concatenate(blocks, axis=1)), keys, families)

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
        return self.reduce((weights / total) @ self.matrix)  # divided on the smaller side


def resample_weights(images: int, resamples: int, seed: int, width: int = 0
                     ) -> Iterator[np.ndarray]:
    """(b, N) float64 multinomial counts of ``resamples`` bootstrap draws of N images, in chunks
    of at most :data:`CHUNK` values, also of the (b, ``width``) rows they are applied to; the
    same seed gives the same draws (for every method alike, in chunks of any size)."""
    rng = np.random.default_rng(seed)
    step = max(1, min(resamples, CHUNK // max(images, width, 1)))
    for first in range(0, resamples, step):
        count = min(step, resamples - first)
        drawn = rng.integers(0, images, size=(count, images))
        drawn += images * np.arange(count)[:, None]
        yield np.bincount(drawn.ravel(), minlength=count * images).reshape(
            count, images).astype(np.float64)


def resampled_values(records: Records, resamples: int = RESAMPLES, seed: int = 0,
                     groups: np.ndarray | None = None,
                     done: Callable[[int], None] | None = None) -> tuple[list[str], np.ndarray]:
    """The result keys and their (resamples, K) bootstrap values for one method's records;
    with ``groups`` (a label per record, in dataset-index order), groups are resampled.
    ``done(count)`` is told of each chunk of resamples (a progress display)."""
    columns = Columns.of(records)
    if groups is not None:
        columns = columns.grouped(groups)
    count, width = columns.matrix.shape
    values = np.empty((resamples, len(columns.names())))
    first = 0
    for weights in resample_weights(count, resamples, seed, width):
        values[first:first + len(weights)] = columns.values(weights)
        first += len(weights)
        if done is not None:
            done(len(weights))
    return columns.names(), values


def _interval(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per column, the percentile interval (one column at a time: no copy of the whole)."""
    bounds = [np.quantile(values[:, k], [(1 - level) / 2, (1 + level) / 2])
              for k in range(values.shape[1])]
    low, high = np.array(bounds).reshape(-1, 2).T
    return low, high


def _plain(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def bootstrap(records: Mapping[str, Records], resamples: int = RESAMPLES, seed: int = 0,
              level: float = LEVEL, baseline: str | None = None,
              groups: np.ndarray | None = None,
              points: Mapping[str, Mapping[str, Any]] | None = None,
              done: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Intervals of every method's metrics on one data set, and paired comparisons with
    ``baseline`` (a key of ``records``): a JSON-ready dict (NaN and infinities as None).

    Every method must hold the same images (the same dataset indices), as ``sodkit eval``'s do.
    ``groups``: each image's group (dataset-index order) when the dataset's numbers are
    averages over groups; the groups are then what is resampled (a cluster bootstrap), and
    ``points`` gives each method's numbers (default: ``summarize`` of its records).
    ``done(count)`` is told of each chunk of resamples, method after method (a progress
    display). One method's resampled values are held at a time, beside the baseline's.

    Raises:
        ValueError: fewer than :data:`MIN_SAMPLES` images (groups), methods on different images,
            an unknown baseline, or more resampled values than :data:`MAX_KEPT_BYTES`.
    """
    methods = list(records)
    index = records[methods[0]].sorted().index
    if any(not np.array_equal(records[m].sorted().index, index) for m in methods):
        raise ValueError("a paired bootstrap needs every method measured on the same images")
    if baseline is not None and baseline not in records:
        raise ValueError(f"baseline {baseline!r} is none of the methods {', '.join(methods)}")
    samples = len(index) if groups is None else len(set(np.asarray(groups).tolist()))
    if samples < MIN_SAMPLES:
        raise ValueError(f"a bootstrap needs at least {MIN_SAMPLES} images or groups, got "
                         f"{samples}")
    keys = key_count(records[methods[0]].extra)
    if kept_bytes(resamples, len(methods), keys) > MAX_KEPT_BYTES:
        raise ValueError(f"{resamples} resamples x {keys} keys exceed "
                         f"{MAX_KEPT_BYTES >> 20} MiB of resampled values")
    over = "images" if groups is None else "groups"
    out: dict[str, Any] = {"images": len(index), "resamples": resamples, "seed": seed,
                           "level": level, "method": f"percentile bootstrap over {over}",
                           "intervals": {}, "baseline": baseline, "comparisons": {}}
    if groups is not None:
        out["groups"] = samples
    points = points or {m: summarize(records[m]) for m in methods}
    order = [baseline] * (baseline is not None) + [m for m in methods if m != baseline]
    base = None
    for method in order:
        names, values = resampled_values(records[method], resamples, seed, groups, done)
        low, high = _interval(values, level)
        out["intervals"][method] = {
            key: {"value": _plain(points[method][key]), "low": _plain(lo), "high": _plain(hi)}
            for key, lo, hi in zip(names, low, high, strict=True)}
        if method == baseline:
            base = values
        elif base is not None:
            values -= base  # in place: no second copy
            out["comparisons"][method] = _compare(names, values, points[method],
                                                  points[baseline], level)
    out["intervals"] = {m: out["intervals"][m] for m in methods}  # the methods' order
    return out


def _compare(keys: list[str], differences: np.ndarray, ours: Mapping[str, Any],
             theirs: Mapping[str, Any], level: float) -> dict[str, dict[str, Any]]:
    """Per key: the observed difference, its interval, the p-value and whether the interval
    excludes 0."""
    low, high = _interval(differences, level)
    p = p_values(differences)
    result = {}
    for k, key in enumerate(keys):
        finite = np.isfinite(low[k]) and np.isfinite(high[k])
        excludes = bool(finite and (low[k] > 0 or high[k] < 0))
        if finite and excludes != (p[k] < 1 - level):  # only at the edge, by rounding
            p[k] = np.nextafter(1 - level, 0) if excludes else 1 - level
        result[key] = {"difference": _plain(ours[key] - theirs[key]), "low": _plain(low[k]),
                       "high": _plain(high[k]), "p": float(p[k]) if finite else None,
                       "excludes_zero": excludes}
    return result


def p_values(differences: np.ndarray) -> np.ndarray:
    """Per column of (B, K) resampled differences, the two-sided p-value of the percentile
    interval: the smallest ``alpha`` for which the interval between the ``alpha / 2`` and
    ``1 - alpha / 2`` quantiles (``np.quantile``'s linear interpolation, as the interval's)
    holds 0, at least ``2 / (B + 1)``. With ``A`` the share of the quantile function below 0
    and ``C`` where it rises above 0, that is ``min(1, 2 (1 - A), 2 C)``; so the interval of any
    level excludes 0 exactly when ``p < 1 - level``. NaN where a column is not finite."""
    count = len(differences)
    out = np.full(differences.shape[1], np.nan)
    for k in range(differences.shape[1]):
        column = np.sort(differences[:, k])  # one column at a time: no copy of the whole
        if count < 2 or not np.isfinite(column).all():
            continue
        below = _crossing(column, int(np.searchsorted(column, 0.0, "left")))
        above = _crossing(column, int(np.searchsorted(column, 0.0, "right")))
        out[k] = max(min(1.0, 2 * (1 - below), 2 * above), 2 / (count + 1))
    return out


def _crossing(column: np.ndarray, split: int) -> float:
    """Where (as a probability) the interpolated quantile function of the sorted ``column``
    passes 0 between its values ``split - 1`` and ``split``."""
    if split == 0:
        return 0.0
    if split == len(column):
        return 1.0
    low, high = column[split - 1], column[split]
    return (split - 1 + (-low) / (high - low)) / (len(column) - 1)
