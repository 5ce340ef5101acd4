"""Which way each metric is better, and the best three of a column.

A comparison is ``{method: {dataset: {metric: value}}}``. Everything here is plain Python so
``sodkit eval`` and ``sodkit report`` stay free of heavy imports; which way a metric is better
comes from ``sodkit.metrics.keys``, as for the checkpoint selection.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..metrics.keys import lower_is_better  # errors (MAE, BER, HCE, ...): smaller is better

Comparison = Mapping[str, Mapping[str, Mapping[str, float]]]

PAPER_METRICS = ("Smeasure", "wFmeasure", "MAE", "meanEm", "maxFm")  # the usual paper columns
TOP = 3


def ranks(values: Sequence[float | None], metric: str, decimals: int | None = None,
          top: int = TOP) -> list[int | None]:
    """Rank 1..``top`` of each value in its column (None: not among the best, or missing/NaN).

    Values are compared as shown (rounded to ``decimals`` when given), and equal values share a
    rank, so a table never marks one of two numbers that print the same.
    """
    shown = [None if v is None or math.isnan(v) else (round(v, decimals) if decimals is not None
                                                        else v) for v in values]
    distinct = sorted({v for v in shown if v is not None}, reverse=not lower_is_better(metric))
    place = {value: i + 1 for i, value in enumerate(distinct[:top])}
    return [None if v is None else place.get(v) for v in shown]


def datasets_of(comparison: Comparison) -> list[str]:
    """Datasets in the order they first appear."""
    seen: list[str] = []
    for per_dataset in comparison.values():
        seen += [name for name in per_dataset if name not in seen]
    return seen


def column_ranks(comparison: Comparison, datasets: Sequence[str], metrics: Sequence[str],
                 decimals: int | None = None) -> dict[tuple[str, str, str], int]:
    """``{(method, dataset, metric): rank}`` for the best ``TOP`` of every column."""
    methods = list(comparison)
    out: dict[tuple[str, str, str], int] = {}
    for dataset in datasets:
        for metric in metrics:
            values = [comparison[m].get(dataset, {}).get(metric) for m in methods]
            for method, rank in zip(methods, ranks(values, metric, decimals), strict=True):
                if rank is not None:
                    out[(method, dataset, metric)] = rank
    return out
