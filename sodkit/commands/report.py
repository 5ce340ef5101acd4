"""``sodkit report``: one HTML page for a run, or a comparison of runs and ``sodkit eval`` outputs.

Reads the folders' result files back (no torch; TensorBoard's event reader for the training
curves) and writes a single self-contained HTML file, optionally the paper tables too.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from ._common import user_path

HELP = "one HTML page per run or comparison of runs (tables, curves, images); LaTeX / xlsx tables"

if TYPE_CHECKING:
    from ..report.latex import Marks
    from ..report.sources import Source

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..report.publish import add_table_arguments

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


def run(args: argparse.Namespace) -> int:
    from ..report.html import build_report
    from ..report.publish import (
        check_output_file,
        check_table_outputs,
        check_tables,
        parse_metrics,
        write_file,
        write_tables,
    )
    from ..report.sources import load_sources

    folders = [Path(f) for f in args.folders]
    out = check_output_file(args.out, folders, args.force, "--out")
    check_table_outputs(args, folders)
    sources = load_sources(folders)
    comparison: dict[str, dict[str, dict[str, float]]] = {}
    for source in sources:
        comparison.update(source.results)  # method names are distinct across sources
    check_tables(comparison, args)  # before the page: nothing is written on a refusal
    if args.ci and not any(source.ci for source in sources):
        raise UserError("--ci: none of the folders holds a ci.json; evaluate with sodkit eval "
                        "--ci (the report cannot recompute intervals: the folders keep no "
                        "per-image histograms)")
    marks = _marks(sources, args.latex) if args.latex_ci else None
    page = build_report(sources, parse_metrics(args.metrics), ci=args.ci)
    write_file(out, lambda path: path.write_text(page, encoding="utf-8"), args.force)
    write_tables(comparison, args, marks=marks)
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
