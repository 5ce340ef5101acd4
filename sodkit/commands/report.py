"""``sodkit report``: one HTML page for a run, or a comparison of runs and ``sodkit eval`` outputs.

Reads the folders' result files back (no torch; TensorBoard's event reader for the training
curves) and writes a single self-contained HTML file, optionally the paper tables too.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ._common import user_path

HELP = "one HTML page per run or comparison of runs (tables, curves, images); LaTeX / xlsx tables"

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
    page = build_report(sources, parse_metrics(args.metrics))
    write_file(out, lambda path: path.write_text(page, encoding="utf-8"), args.force)
    write_tables(comparison, args)
    return 0
