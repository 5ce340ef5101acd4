"""The comparison as an Excel workbook (openpyxl, the optional ``report`` extra).

One sheet: a row of dataset groups (merged cells), a row of metric names, a row per method;
the best three per column marked like the LaTeX table (bold / underline / italic, or fills).
Every name is a string cell (:func:`~sodkit.report.cells.text_cell`: never a formula, whatever
it starts with); every score a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ..errors import UserError
from .cells import text_cell
from .ranking import Comparison, column_ranks, lower_is_better

FILLS = ("FFC7CE", "BDD7EE", "C6EFCE")  # red, blue, green tints for ranks 1, 2, 3
CREATOR = "sodkit"


def _openpyxl():
    try:
        import openpyxl
    except ImportError as exc:
        from ..extras import install_hint

        raise UserError(f"--xlsx needs openpyxl, which is not installed: "
                        f"{install_hint('report')}") from exc
    return openpyxl


def write_xlsx(comparison: Comparison, datasets: Sequence[str], metrics: Sequence[str],
               path: Path, style: str = "fonts", decimals: int = 3) -> None:
    """Write the comparison to ``path`` (numbers, not rounded text; shown with ``decimals``)."""
    openpyxl = _openpyxl()
    from openpyxl.styles import Alignment, Font, PatternFill

    book = openpyxl.Workbook()
    book.properties.creator = CREATOR
    sheet = book.active
    sheet.title = "results"
    ranked = column_ranks(comparison, datasets, metrics, decimals)
    text_cell(sheet, 1, 1, "dataset")
    text_cell(sheet, 2, 1, "method")
    for i, dataset in enumerate(datasets):
        first = 2 + i * len(metrics)
        text_cell(sheet, 1, first, dataset).alignment = Alignment(horizontal="center")
        sheet.merge_cells(start_row=1, start_column=first, end_row=1,
                          end_column=first + len(metrics) - 1)
        for j, metric in enumerate(metrics):
            arrow = "↓" if lower_is_better(metric) else "↑"
            text_cell(sheet, 2, first + j, f"{metric} {arrow}").font = Font(bold=True)
    fonts = (Font(bold=True), Font(underline="single"), Font(italic=True))
    for row, (method, per_dataset) in enumerate(comparison.items(), start=3):
        text_cell(sheet, row, 1, method)
        for i, dataset in enumerate(datasets):
            for j, metric in enumerate(metrics):
                value = per_dataset.get(dataset, {}).get(metric)
                if value is None or math.isnan(value):
                    continue
                cell = sheet.cell(row, 2 + i * len(metrics) + j, value)
                cell.number_format = "0." + "0" * decimals
                rank = ranked.get((method, dataset, metric))
                if rank and style == "fonts":
                    cell.font = fonts[rank - 1]
                elif rank:
                    cell.fill = PatternFill("solid", fgColor=FILLS[rank - 1])
    book.save(path)


def is_sodkit_workbook(path: Path) -> bool:
    """Whether ``path`` is a workbook this module wrote (so it may be replaced)."""
    try:
        openpyxl = _openpyxl()
        return openpyxl.load_workbook(path, read_only=True).properties.creator == CREATOR
    except Exception:  # not a workbook, or unreadable: not ours
        return False
