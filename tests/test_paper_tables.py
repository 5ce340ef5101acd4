"""Paper tables: metric direction, best three per column, LaTeX (compiled with pdflatex where
present, and always checked for structure) and xlsx."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from sodkit.report.latex import latex_table
from sodkit.report.ranking import column_ranks, lower_is_better, ranks
from tests import processes

METRICS = ["Smeasure", "wFmeasure", "MAE", "meanEm", "maxFm"]
DATASETS = ["DUTS-TE", "EC_SSD & co"]  # special characters must be escaped


def comparison() -> dict:
    """Five methods with distinct values; 'best' wins every column, 'worst' loses every one."""
    quality = {"best": 0.9, "second": 0.8, "third": 0.7, "fourth": 0.6, "worst": 0.5}
    return {method: {d: {m: (1 - q) / 4 + i / 100 if m == "MAE" else q - i / 100
                         for m in METRICS} for i, d in enumerate(DATASETS)}
            for method, q in quality.items()}


def test_direction_of_each_metric():
    assert lower_is_better("MAE") and lower_is_better("meanBER")
    assert not any(lower_is_better(m) for m in ("Smeasure", "maxFm", "meanEm", "wFmeasure"))
    assert ranks([0.1, 0.05, 0.2, 0.3], "MAE") == [2, 1, 3, None]
    assert ranks([0.1, 0.05, 0.2, 0.3], "Smeasure") == [3, None, 2, 1]
    assert ranks([0.81234, 0.81229, None, float("nan")], "maxFm", decimals=3) == [1, 1, None,
                                                                                   None]


def test_best_three_per_column():
    ranked = column_ranks(comparison(), DATASETS, METRICS)
    for dataset in DATASETS:
        for metric in METRICS:
            got = {method: ranked.get((method, dataset, metric)) for method in comparison()}
            assert got == {"best": 1, "second": 2, "third": 3, "fourth": None, "worst": None}


def check_structure(text: str, methods: list[str], marks: tuple[str, str, str]) -> None:
    """Balanced environments, one row per method, each mark once per column."""
    begins = re.findall(r"\\begin\{(\w+)\}", text)
    ends = re.findall(r"\\end\{(\w+)\}", text)
    assert begins == ends[::-1] == ["table", "tabular"]
    body = text.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
    rows = [line for line in body.splitlines() if line.endswith("\\\\")]
    assert [row.split(" & ")[0] for row in rows] == methods
    cells = [row[: -2].split(" & ")[1:] for row in rows]
    for column in zip(*cells, strict=True):
        for mark in marks:
            assert sum(cell.startswith(mark + "{") for cell in column) == 1, (mark, column)
    assert text.count("\\cmidrule") == len(DATASETS)
    assert "EC\\_SSD \\& co" in text and "$M\\,\\downarrow$" in text


@pytest.mark.parametrize(("style", "marks", "packages"), [
    ("fonts", ("\\textbf", "\\underline", "\\textit"), "booktabs"),
    ("colors", ("\\textcolor{red}", "\\textcolor{blue}", "\\textcolor{green!50!black}"),
     "booktabs,xcolor"),
])
def test_latex_table_structure_and_pdflatex(tmp_path: Path, style, marks, packages):
    text = latex_table(comparison(), DATASETS, METRICS, style=style)
    check_structure(text, list(comparison()), marks)
    assert "\\textbf{0.900}" in text or style == "colors"
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        return  # the structural check above is what can be done without TeX
    (tmp_path / "table.tex").write_text(text)
    (tmp_path / "paper.tex").write_text(
        f"\\documentclass{{article}}\\usepackage{{{packages}}}\\begin{{document}}"
        "\\input{table.tex}\\end{document}\n")
    done = processes.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                         cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 1000


def test_xlsx_holds_the_values_and_marks(tmp_path: Path):
    openpyxl = pytest.importorskip("openpyxl", reason="the report extra: pip install "
                                                      "'sodkit[report]'")
    from sodkit.report.xlsx import is_sodkit_workbook, write_xlsx

    path = tmp_path / "t.xlsx"
    write_xlsx(comparison(), DATASETS, METRICS, path)
    sheet = openpyxl.load_workbook(path).active
    assert sheet.cell(1, 2).value == "DUTS-TE" and sheet.cell(2, 4).value == "MAE ↓"
    methods = [sheet.cell(row, 1).value for row in range(3, 8)]
    assert methods == list(comparison())
    expected = comparison()["best"]["DUTS-TE"]["MAE"]
    assert sheet.cell(3, 4).value == pytest.approx(expected, rel=1e-14)
    assert sheet.cell(3, 4).font.bold and sheet.cell(4, 4).font.underline == "single"
    assert sheet.cell(5, 4).font.italic and not sheet.cell(6, 4).font.bold
    assert is_sodkit_workbook(path)
