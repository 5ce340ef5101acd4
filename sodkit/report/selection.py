"""``sodkit report --include/--exclude-{methods,datasets}``: the methods and datasets a page,
its paper tables and its figures show (#25), with ``sodkit eval``'s rules
(:mod:`sodkit.include_exclude`): names as the results hold them, an unknown name an error
naming the known ones, nothing left an error."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sources import Source


def add_report_selection(parser: argparse.ArgumentParser) -> None:
    from ..include_exclude import names_option

    group = parser.add_argument_group("selection")
    for kind in ("methods", "datasets"):
        group.add_argument(f"--include-{kind}", type=names_option, metavar="NAME,...",
                           help=f"show only these {kind} (page, paper tables, figures)")
        group.add_argument(f"--exclude-{kind}", type=names_option, metavar="NAME,...",
                           help=f"leave these {kind} out")


def _names(sources: Sequence[Source]) -> tuple[list[str], list[str]]:
    methods: list[str] = []
    datasets: list[str] = []
    for source in sources:
        methods += [m for m in source.results if m not in methods]
        datasets += [d for d in source.datasets if d not in datasets]
    return methods, datasets


def select_sources(sources: list[Source], args: argparse.Namespace) -> list[Source]:
    """Keep, in every source, only the selected methods and datasets (results, curves and
    per-image rows alike); the sources left with results."""
    from ..include_exclude import select

    asked = [args.include_methods, args.exclude_methods, args.include_datasets,
             args.exclude_datasets]
    if not any(asked):
        return sources
    methods, datasets = _names(sources)
    methods = select(methods, args.include_methods, args.exclude_methods, "methods")
    datasets = select(datasets, args.include_datasets, args.exclude_datasets, "datasets")
    for source in sources:
        results = {m: {d: v for d, v in per.items() if d in datasets}
                   for m, per in source.results.items() if m in methods}
        source.results = {m: per for m, per in results.items() if per}
        source.curves = {d: {m: c for m, c in per.items() if m in methods}
                         for d, per in source.curves.items() if d in datasets}
        source.per_image = [row for row in source.per_image
                            if row["method"] in methods and row["dataset"] in datasets]
    return [source for source in sources if source.results]
