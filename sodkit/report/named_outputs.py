"""Files a person asked for by name (``--out``, ``--latex``, ``--xlsx``), written safely.

The rules of ``docs/reliability.md`` for single files (:func:`sodkit.outputs.single_file`): an
output file is never one of the inputs nor inside an input folder, ``--force`` or not, nor in a
folder another command made; an existing file is replaced only when sodkit wrote it and nobody
changed it since (its hash is in the ``.sodkit-files`` record beside it), or with ``--force``; a
missing parent folder is created as an output folder of the command.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..argtypes import int_in, user_path
from ..errors import UserError
from .ranking import PAPER_METRICS, Comparison, datasets_of

if TYPE_CHECKING:
    from .latex import Marks

logger = logging.getLogger(__name__)


class TableOptions(Protocol):
    """What the paper tables are asked for: the options of :func:`add_table_arguments` (an
    ``argparse.Namespace`` of ``eval`` or ``report``), or a ``sodkit.evaluation.EvalRequest``."""

    latex: str | Path | None
    latex_style: str
    latex_ci: bool
    latex_transpose: bool
    xlsx: str | Path | None
    metrics: str
    decimals: int
    force: bool


def add_table_arguments(parser: argparse.ArgumentParser) -> None:
    """``--latex``, ``--xlsx`` and how they look (shared by ``sodkit eval`` and ``report``)."""
    parser.add_argument("--latex", metavar="FILE.tex", type=user_path,
                        help="a booktabs table: datasets as column groups, methods as rows, the "
                             "best three per column marked")
    parser.add_argument("--latex-style", choices=["fonts", "colors"], default="fonts",
                        help="how the best three are marked: bold / underline / italic (fonts, "
                             "default) or red / blue / green (colors, needs xcolor)")
    parser.add_argument("--latex-ci", action="store_true",
                        help="in the LaTeX table, mark with a dagger each method's value whose "
                             "difference with the baseline is not significant (its 95%% paired "
                             "bootstrap interval holds 0): eval --baseline, or the ci.json of "
                             "the folders given to report")
    parser.add_argument("--latex-transpose", action="store_true",
                        help="the LaTeX table transposed: methods as columns, a row per dataset "
                             "and metric")
    parser.add_argument("--xlsx", metavar="FILE.xlsx", type=user_path,
                        help="the same table as a workbook (needs openpyxl: sodkit[report])")
    parser.add_argument("--metrics", default=",".join(PAPER_METRICS),
                        help=f"comma-separated columns of the paper tables (default "
                             f"{','.join(PAPER_METRICS)}; MAE and BER are errors: lower is "
                             f"better, every other metric higher)")
    parser.add_argument("--decimals", type=int_in(0, 9), default=3,
                        help="digits shown in the paper tables (default 3); the best three are "
                             "ranked on the shown numbers")


def check_output_file(path: str | Path, inputs: Sequence[Path], force: bool, what: str,
                      kind: str = "report") -> Path:
    """``path`` if ``sodkit kind`` may write it (see the module docstring), else a UserError."""
    from ..outputs import single_file

    single_file(path, kind, force, what, inputs)
    return Path(path)


def write_file(path: Path, write: Callable[[Path], None], force: bool = False,
               kind: str = "report", what: str = "--out") -> None:
    """``write(tmp)`` the file, then put it in place as ``path`` (checked again now, recorded);
    a missing parent folder is created as an output folder of ``kind``."""
    from ..outputs import write_single

    write_single(path, kind, force, what, write)


MAX_DECIMALS = 12  # a float holds ~16 significant digits; the scores are in [0, 1]


def parse_metrics(text: str) -> list[str]:
    """The ``--metrics`` names, each a metric sodkit computes (a UserError names the others)."""
    from ..metrics.families import family_keys
    from ..metrics.results import METRIC_KEYS

    known = METRIC_KEYS + family_keys()  # a family's keys: in the results where it was computed
    metrics = [m.strip() for m in text.split(",") if m.strip()]
    if not metrics:
        raise UserError("--metrics: name at least one metric, e.g. --metrics MAE,Smeasure")
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise UserError(f"--metrics: unknown {', '.join(unknown)}; choose from "
                        f"{', '.join(known)}")
    return metrics


def check_table_outputs(args: TableOptions, inputs: Sequence[Path],
                        kind: str = "report") -> None:
    """Before any work: ``--metrics`` and ``--decimals`` make sense, and ``sodkit kind`` may
    write the ``--latex`` / ``--xlsx`` files."""
    parse_metrics(args.metrics)
    if not 0 <= args.decimals <= MAX_DECIMALS:
        raise UserError(f"--decimals {args.decimals}: give 0 to {MAX_DECIMALS} digits, e.g. "
                        f"--decimals 3")
    for flag in ("latex", "xlsx"):
        if getattr(args, flag, None):
            check_output_file(getattr(args, flag), inputs, getattr(args, "force", False),
                              f"--{flag}", kind)
    if getattr(args, "xlsx", None):
        from .xlsx import _openpyxl

        _openpyxl()


def check_tables(comparison: Comparison, args: TableOptions) -> None:
    """Before anything is written: the results hold every metric the paper tables show."""
    if not (args.latex or args.xlsx):
        return
    known = {m for per in comparison.values() for values in per.values() for m in values}
    unknown = [m for m in parse_metrics(args.metrics) if m not in known]
    if unknown:
        raise UserError(f"--metrics: no results hold {', '.join(unknown)}; known: "
                        f"{', '.join(sorted(known))}")


def write_tables(comparison: Comparison, args: TableOptions, kind: str = "report",
                 marks: Marks | None = None) -> None:
    """Write ``--latex`` and ``--xlsx`` (if asked) for ``{method: {dataset: {metric: v}}}``,
    as outputs of ``sodkit kind``; ``marks``: the LaTeX table's dagger cells (``--latex-ci``)."""
    check_tables(comparison, args)
    metrics = parse_metrics(args.metrics)
    datasets = datasets_of(comparison)
    if args.latex:
        from .latex import latex_table
        from .latex_transposed import latex_table_transposed

        if args.latex_transpose:
            text = latex_table_transposed(comparison, datasets, metrics, args.latex_style,
                                          args.decimals, marks=marks)
        else:
            text = latex_table(comparison, datasets, metrics, args.latex_style, args.decimals,
                               marks=marks)
        write_file(Path(args.latex), lambda p: p.write_text(text), args.force, kind, "--latex")
    if args.xlsx:
        from .xlsx import write_xlsx

        write_file(Path(args.xlsx), lambda p: write_xlsx(comparison, datasets, metrics, p,
                                                         args.latex_style, args.decimals),
                   args.force, kind, "--xlsx")
