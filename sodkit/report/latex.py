"""Paper tables in LaTeX: booktabs, datasets as column groups, methods as rows, best three marked.

The file is a ``table`` environment to ``\\input`` into a paper; its first lines say which
packages it needs (``booktabs``; ``xcolor`` for the ``colors`` style).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from .ranking import Comparison, column_ranks, lower_is_better

# how ranks 1, 2, 3 are marked: LaTeX macros applied to the number
STYLES = {
    "fonts": ("\\textbf", "\\underline", "\\textit"),
    "colors": ("\\textcolor{red}", "\\textcolor{blue}", "\\textcolor{green!50!black}"),
}
STYLE_WORDS = {"fonts": "bold, underlined, italic", "colors": "red, blue, green"}
SYMBOLS = {
    "MAE": "M", "Smeasure": "S_\\alpha", "wFmeasure": "F^{w}_{\\beta}",
    "maxFm": "F^{max}_{\\beta}", "meanFm": "F^{mean}_{\\beta}", "adpFm": "F^{adp}_{\\beta}",
    "maxEm": "E^{max}_{\\phi}", "meanEm": "E^{mean}_{\\phi}", "adpEm": "E^{adp}_{\\phi}",
}
_SPECIAL = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#",
            "_": "\\_", "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}",
            "^": "\\textasciicircum{}"}
SIGNATURE = "% written by sodkit"


@dataclass
class Marks:
    """``--latex-ci``: the (method, dataset, metric) cells not significantly different from the
    baseline, marked with a dagger and explained under the table."""

    baseline: str
    cells: set[tuple[str, str, str]] = field(default_factory=set)


def dagger(marks: Marks | None, method: str, dataset: str, metric: str) -> str:
    """The mark of a cell not significantly different from the baseline ('' otherwise)."""
    return "$^\\dagger$" if marks and (method, dataset, metric) in marks.cells else ""


def marks_note(marks: Marks | None) -> list[str]:
    """The line under the table that says what a dagger means (none without marks)."""
    if marks is None:
        return []
    return [f"\\par\\footnotesize $^\\dagger$ not significantly different from "
            f"{escape(marks.baseline)} (the 95\\% paired bootstrap interval of the difference "
            f"holds 0)"]


def escape(text: str) -> str:
    """Text as LaTeX source (the ten special characters escaped)."""
    return "".join(_SPECIAL.get(c, c) for c in text)


def metric_header(metric: str) -> str:
    """``$S_\\alpha\\uparrow$``-style header: the usual symbol and the better direction."""
    arrow = "\\downarrow" if lower_is_better(metric) else "\\uparrow"
    symbol = SYMBOLS.get(metric)
    if symbol is None:
        return f"{escape(metric)}$\\,{arrow}$"
    return f"${symbol}\\,{arrow}$"


def _cell(value: float | None, rank: int | None, style: str, decimals: int) -> str:
    if value is None:
        return "--"
    if math.isnan(value):
        return "nan"
    text = f"{value:.{decimals}f}"
    return f"{STYLES[style][rank - 1]}{{{text}}}" if rank else text


def table_head(style: str, caption: str, best_per: str, columns: str) -> list[str]:
    """The lines of a table up to ``\\toprule``: the signature comment naming the packages and
    the marks, the table environment, caption, label and the tabular's column spec."""
    if style not in STYLES:
        raise ValueError(f"unknown LaTeX style {style!r}; choose one of {', '.join(STYLES)}")
    packages = "booktabs" + (", xcolor" if style == "colors" else "")
    return [f"{SIGNATURE} (needs \\usepackage{{{packages}}}); best three per {best_per}: "
            f"{STYLE_WORDS[style]}",
            "\\begin{table}[t]", "\\centering", f"\\caption{{{escape(caption)}}}",
            "\\label{tab:sod-results}", f"\\begin{{tabular}}{{{columns}}}", "\\toprule"]


def latex_table(
    comparison: Comparison,
    datasets: Sequence[str],
    metrics: Sequence[str],
    style: str = "fonts",
    decimals: int = 3,
    caption: str = "Quantitative comparison.",
    marks: Marks | None = None,
) -> str:
    """A booktabs ``table``: a column group per dataset, a row per method, best three marked.

    Args:
        comparison: ``{method: {dataset: {metric: value}}}`` (rows in this order).
        datasets, metrics: the column groups and the columns of each group.
        style: ``fonts`` (bold / underline / italic) or ``colors`` (red / blue / green).
        decimals: digits shown; ranks compare the shown values.
        marks: cells to mark with a dagger (no significant difference with the baseline).
    """
    ranked = column_ranks(comparison, datasets, metrics, decimals)
    width = len(metrics)
    lines = table_head(style, caption, "column", f"l{'c' * width * len(datasets)}")
    groups = " & ".join(f"\\multicolumn{{{width}}}{{c}}{{{escape(d)}}}" for d in datasets)
    lines.append(f" & {groups} \\\\")
    lines.append(" ".join(f"\\cmidrule(lr){{{2 + i * width}-{1 + (i + 1) * width}}}"
                          for i in range(len(datasets))))
    headers = " & ".join(metric_header(m) for _ in datasets for m in metrics)
    lines += [f"Method & {headers} \\\\", "\\midrule"]
    for method, per_dataset in comparison.items():
        cells = [_cell(per_dataset.get(d, {}).get(m), ranked.get((method, d, m)), style, decimals)
                 + dagger(marks, method, d, m) for d in datasets for m in metrics]
        lines.append(" & ".join([escape(method), *cells]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", *marks_note(marks), "\\end{table}"]
    return "\n".join(lines) + "\n"
