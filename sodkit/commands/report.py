"""``sodkit report``: one HTML page for a run, or a comparison of runs and ``sodkit eval`` outputs.

Reads the folders' result files back (no torch; TensorBoard's event reader for the training
curves) and writes a single self-contained HTML file, optionally the paper tables too.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import user_path
from ..errors import UserError

if TYPE_CHECKING:
    from ..report.figure_style import FigureStyle

HELP = "one HTML page per run or comparison of runs (tables, curves, images); LaTeX / xlsx tables"

if TYPE_CHECKING:
    from ..report.latex import Marks
    from ..report.sources import Source

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..report.figure_style import add_figure_arguments
    from ..report.named_outputs import add_table_arguments
    from ..report.selection import add_report_selection

    parser.add_argument("folders", nargs="+", metavar="RUN_DIR",
                        help="run folders (sodkit train / test) or sodkit eval output folders")
    parser.add_argument("--out", required=True, type=user_path, metavar="FILE.html",
                        help="the page to write")
    parser.add_argument("--force", action="store_true",
                        help="replace existing --out / --latex / --xlsx files that sodkit report "
                             "did not write, or that were changed since (never an input)")
    parser.add_argument("--ci", action="store_true",
                        help="show the 95%% intervals and paired comparisons that sodkit eval "
                             "--ci saved (ci.json) under the comparison table")
    add_table_arguments(parser)
    add_figure_arguments(parser)
    add_report_selection(parser)


def run(args: argparse.Namespace) -> int:
    from ..report.html import build_report
    from ..report.named_outputs import (
        check_output_file,
        check_table_outputs,
        check_tables,
        parse_metrics,
        write_file,
        write_tables,
    )
    from ..report.selection import select_sources
    from ..report.sources import load_sources

    folders = [Path(f) for f in args.folders]
    style = _check_figures(args, folders)
    _check_collisions(args, folders, style)
    out = check_output_file(args.out, folders, args.force, "--out")
    check_table_outputs(args, folders)
    sources = load_sources(folders)
    sources = select_sources(sources, args)
    comparison: dict[str, dict[str, dict[str, float]]] = {}
    for source in sources:
        comparison.update(source.results)  # method names are distinct across sources
    check_tables(comparison, args)  # before the page: nothing is written on a refusal
    if args.ci and not any(source.ci for source in sources):
        raise UserError("--ci: none of the folders holds a ci.json; evaluate with sodkit eval "
                        "--ci (the report cannot recompute intervals: the folders keep no "
                        "per-image histograms)")
    marks = _marks(sources, args.latex) if args.latex_ci else None
    figures = _render_figures(args, sources, style)
    page = build_report(sources, parse_metrics(args.metrics), ci=args.ci)
    write_file(out, lambda path: path.write_text(page, encoding="utf-8"), args.force)
    write_tables(comparison, args, marks=marks)
    if figures:
        from ..report.publication import write_figures

        write_figures(figures, Path(args.figures), args.force)
    return 0


def _marks(sources: list[Source], latex: str | None) -> Marks:
    """``--latex-ci``: the cells of every folder's ci.json that do not differ significantly
    from the (one) baseline."""
    from ..report.intervals import latex_marks
    from ..report.latex import Marks

    if not latex:
        raise UserError("--latex-ci marks values in the LaTeX table: add --latex FILE.tex")
    if not any(source.ci for source in sources):
        raise UserError("--latex-ci: none of the folders holds a ci.json; evaluate with "
                        "sodkit eval --baseline NAME")
    parts = [latex_marks(source.ci, source.renamed) for source in sources if source.ci]
    baselines = {part.baseline for part in parts}
    if len(baselines) > 1:
        raise UserError(f"--latex-ci: the folders compare with different baselines "
                        f"({', '.join(sorted(baselines))}); give folders of one baseline")
    return Marks(parts[0].baseline, set().union(*(part.cells for part in parts)))



def _render_figures(args: argparse.Namespace, sources: list, style: FigureStyle | None
                    ) -> dict[str, bytes]:
    """The ``--figures`` files, drawn from every folder's curves (none without the option)."""
    if style is None:
        return {}
    from ..report.publication import render_figures

    curves: dict[str, dict] = {}
    for source in sources:
        for dataset, per_method in source.curves.items():
            curves.setdefault(dataset, {}).update(per_method)
    return render_figures(curves, args.curves, style)


def _check_figures(args: argparse.Namespace, folders: list[Path]) -> FigureStyle | None:
    """Before any work: the figure style file is valid and the figures may be written."""
    from ..report.figure_style import read_figure_style
    from ..report.named_outputs import check_output_file

    if args.figure_style and not args.figures:
        raise UserError("--figure-style styles the figures of --figures DIR; give --figures")
    if not args.figures:
        return None
    style = read_figure_style(args.figure_style)
    for name in _figure_files(args, style):
        check_output_file(Path(args.figures) / name, folders, args.force, "--figures")
    return style


def _figure_files(args: argparse.Namespace, style: FigureStyle) -> list[str]:
    return [f"{kind}.{fmt}" for kind in args.curves for fmt in style.formats]


def _check_collisions(args: argparse.Namespace, folders: list[Path],
                      style: FigureStyle | None) -> None:
    """No two of the page, the paper tables and the figures are one path, and none is an
    input (the folders, the style file): :mod:`sodkit.collisions`."""
    from ..collisions import Inputs, Output, check_outputs

    outputs = [Output(f"--{flag}", Path(getattr(args, flag)))
               for flag in ("out", "latex", "xlsx") if getattr(args, flag)]
    if style is not None:
        outputs.append(Output("--figures", Path(args.figures), _figure_files(args, style)))
    styles = [Path(args.figure_style)] if args.figure_style else []
    check_outputs(outputs, Inputs(folders, styles))
