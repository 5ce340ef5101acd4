"""The transposed paper table (#25, PySODEvalToolkit's ``converter.py --transpose``): methods as
columns, a row per dataset and metric. For many datasets and few methods, or a one-column paper.

Same marks, symbols and ranking as :func:`sodkit.report.latex.latex_table` (the best three of
each row among the methods, compared on the printed numbers); needs only booktabs (the dataset
is written on the first row of its group, so no multirow package).
"""

from __future__ import annotations

from collections.abc import Sequence

from .latex import Marks, _cell, dagger, escape, marks_note, metric_header, table_head
from .ranking import Comparison, column_ranks


def latex_table_transposed(
    comparison: Comparison,
    datasets: Sequence[str],
    metrics: Sequence[str],
    style: str = "fonts",
    decimals: int = 3,
    caption: str = "Quantitative comparison.",
    marks: Marks | None = None,
) -> str:
    """A booktabs ``table``: a column per method, a row per (dataset, metric), best three of
    each row marked.

    Args:
        comparison: ``{method: {dataset: {metric: value}}}`` (columns in this order).
        datasets, metrics: the row groups and the rows of each group.
        style: ``fonts`` (bold / underline / italic) or ``colors`` (red / blue / green).
        decimals: digits shown; ranks compare the shown values.
        marks: cells to mark with a dagger (no significant difference with the baseline).
    """
    ranked = column_ranks(comparison, datasets, metrics, decimals)
    methods = list(comparison)
    lines = [*table_head(style, caption, "row", f"ll{'c' * len(methods)}"),
             " & ".join(["Dataset", "Metric", *(escape(m) for m in methods)]) + " \\\\"]
    for dataset in datasets:
        lines.append("\\midrule")
        for i, metric in enumerate(metrics):
            cells = [_cell(comparison[m].get(dataset, {}).get(metric),
                           ranked.get((m, dataset, metric)), style, decimals)
                     + dagger(marks, m, dataset, metric) for m in methods]
            head = escape(dataset) if i == 0 else ""
            lines.append(" & ".join([head, metric_header(metric), *cells]) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}", *marks_note(marks), "\\end{table}"]
    return "\n".join(lines) + "\n"
