"""Files a person asked for by name (``--out``, ``--latex``, ``--xlsx``), written safely.

The rules of ``docs/reliability.md`` for single files: an output file is never one of the
inputs nor inside an input folder that sodkit does not own; an existing file is replaced only
when sodkit wrote it (its signature is in it) or with ``--force``; a missing parent folder is
created as sodkit's own (with the marker).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from ..commands._common import int_in, user_path
from ..errors import UserError
from .ranking import PAPER_METRICS, Comparison, datasets_of

logger = logging.getLogger(__name__)

HTML_SIGNATURE = '<meta name="generator" content="sodkit report'


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """``--latex``, ``--xlsx`` and how they look (shared by ``sodkit eval`` and ``report``)."""
    parser.add_argument("--latex", metavar="FILE.tex", type=user_path,
                        help="a booktabs table: datasets as column groups, methods as rows, the "
                             "best three per column marked")
    parser.add_argument("--latex-style", choices=["fonts", "colors"], default="fonts",
                        help="how the best three are marked: bold / underline / italic (fonts, "
                             "default) or red / blue / green (colors, needs xcolor)")
    parser.add_argument("--xlsx", metavar="FILE.xlsx", type=user_path,
                        help="the same table as a workbook (needs openpyxl: sodkit[report])")
    parser.add_argument("--metrics", default=",".join(PAPER_METRICS),
                        help=f"comma-separated columns of the paper tables (default "
                             f"{','.join(PAPER_METRICS)}; MAE and BER are errors: lower is "
                             f"better, every other metric higher)")
    parser.add_argument("--decimals", type=int_in(0, 9), default=3,
                        help="digits shown in the paper tables (default 3); the best three are "
                             "ranked on the shown numbers")


def _is_ours(path: Path) -> bool:
    from .latex import SIGNATURE

    if path.suffix.lower() == ".xlsx":
        from .xlsx import is_sodkit_workbook

        return is_sodkit_workbook(path)
    with open(path, "rb") as handle:
        head = handle.read(2048).decode("utf-8", "replace")
    return head.startswith(SIGNATURE) or HTML_SIGNATURE in head


def check_output_file(path: str | Path, inputs: Sequence[Path], force: bool, what: str) -> Path:
    """``path`` if sodkit may write it (see the module docstring), else a UserError."""
    from ..paths import is_inside, is_owned

    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    for item in inputs:
        item = Path(item)
        if path.resolve() == item.resolve() or (
                item.is_dir() and is_inside(path, item) and not is_owned(item)):
            raise UserError(f"{what} {path} would be written into the input {item}; choose a "
                            f"file outside the inputs")
    if path.exists() and not force and not _is_ours(path):
        raise UserError(f"{what} {path} exists and was not written by sodkit; choose another "
                        f"name, or pass --force to replace it")
    return path


def write_file(path: Path, write: Callable[[Path], None]) -> None:
    """Create the parent folder as sodkit's if it is missing, then ``write`` the file whole or
    not at all (:func:`sodkit.atomic.atomic_target`: a temporary file, renamed over ``path``)."""
    from ..atomic import atomic_target
    from ..paths import claim_folder

    if not path.parent.exists():
        claim_folder(path.parent, "report")
    with atomic_target(path) as tmp:
        write(tmp)
    logger.info("wrote %s", path)


MAX_DECIMALS = 12  # a float holds ~16 significant digits; the scores are in [0, 1]


def parse_metrics(text: str) -> list[str]:
    """The ``--metrics`` names, each a metric sodkit computes (a UserError names the others)."""
    from ..metrics.results import METRIC_KEYS

    metrics = [m.strip() for m in text.split(",") if m.strip()]
    if not metrics:
        raise UserError("--metrics: name at least one metric, e.g. --metrics MAE,Smeasure")
    unknown = [m for m in metrics if m not in METRIC_KEYS]
    if unknown:
        raise UserError(f"--metrics: unknown {', '.join(unknown)}; choose from "
                        f"{', '.join(METRIC_KEYS)}")
    return metrics


def check_table_outputs(args: argparse.Namespace, inputs: Sequence[Path]) -> None:
    """Before any work: ``--metrics`` and ``--decimals`` make sense, and the ``--latex`` /
    ``--xlsx`` files may be written."""
    parse_metrics(args.metrics)
    if not 0 <= args.decimals <= MAX_DECIMALS:
        raise UserError(f"--decimals {args.decimals}: give 0 to {MAX_DECIMALS} digits, e.g. "
                        f"--decimals 3")
    for flag in ("latex", "xlsx"):
        if getattr(args, flag, None):
            check_output_file(getattr(args, flag), inputs, getattr(args, "force", False),
                              f"--{flag}")
    if getattr(args, "xlsx", None):
        from .xlsx import _openpyxl

        _openpyxl()


def check_tables(comparison: Comparison, args: argparse.Namespace) -> None:
    """Before anything is written: the results hold every metric the paper tables show."""
    if not (args.latex or args.xlsx):
        return
    known = {m for per in comparison.values() for values in per.values() for m in values}
    unknown = [m for m in parse_metrics(args.metrics) if m not in known]
    if unknown:
        raise UserError(f"--metrics: no results hold {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(known))}")


def write_tables(comparison: Comparison, args: argparse.Namespace) -> None:
    """Write ``--latex`` and ``--xlsx`` (if asked) for ``{method: {dataset: {metric: v}}}``."""
    check_tables(comparison, args)
    metrics = parse_metrics(args.metrics)
    datasets = datasets_of(comparison)
    if args.latex:
        from .latex import latex_table

        text = latex_table(comparison, datasets, metrics, args.latex_style, args.decimals)
        write_file(Path(args.latex), lambda p: p.write_text(text))
    if args.xlsx:
        from .xlsx import write_xlsx

        write_file(Path(args.xlsx), lambda p: write_xlsx(comparison, datasets, metrics, p,
                                                         args.latex_style, args.decimals))
