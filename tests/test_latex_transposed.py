"""The transposed LaTeX table (#25): methods as columns, a row per dataset and metric, the best
three of each row marked; written by ``sodkit report --latex-transpose`` from eval outputs."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from sodkit.cli import main
from sodkit.report.latex_transposed import latex_table_transposed
from tests import processes
from tests.test_paper_tables import DATASETS, METRICS, comparison


def rows_of(text: str) -> list[list[str]]:
    body = text.split("\\toprule\n", 1)[1].split("\\bottomrule", 1)[0]
    return [line[:-3].split(" & ") for line in body.splitlines() if line.endswith(" \\\\")]


def test_methods_are_columns_and_each_row_marks_its_best_three(tmp_path: Path):
    text = latex_table_transposed(comparison(), DATASETS, METRICS)
    assert re.findall(r"\\begin\{(\w+)\}", text) == ["table", "tabular"]
    assert "\\begin{tabular}{llccccc}" in text
    header, *rows = rows_of(text)
    assert header == ["Dataset", "Metric", "best", "second", "third", "fourth", "worst"]
    assert len(rows) == len(DATASETS) * len(METRICS)
    assert [row[0] for row in rows[::len(METRICS)]] == ["DUTS-TE", "EC\\_SSD \\& co"]
    assert all(row[0] == "" for i, row in enumerate(rows) if i % len(METRICS))
    for row in rows:
        assert row[2].startswith("\\textbf{") and row[3].startswith("\\underline{")
        assert row[4].startswith("\\textit{") and "{" not in row[5] + row[6]
    mae = rows[METRICS.index("MAE")]
    assert mae[1] == "$M\\,\\downarrow$" and mae[2] == "\\textbf{0.025}"
    assert text.count("\\midrule") == len(DATASETS)
    pdflatex = shutil.which("pdflatex")
    if pdflatex is not None:
        (tmp_path / "table.tex").write_text(text)
        (tmp_path / "paper.tex").write_text("\\documentclass{article}\\usepackage{booktabs}"
                                            "\\begin{document}\\input{table.tex}\\end{document}\n")
        done = processes.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error",
                              "paper.tex"], cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-2000:]


def test_report_writes_the_transposed_table(tmp_path: Path):
    from tests.test_publication_figures import eval_output

    out = eval_output(tmp_path)
    table = tmp_path / "paper" / "table.tex"
    assert main(["report", str(out), "--out", str(tmp_path / "page.html"), "--latex",
                 str(table), "--latex-transpose", "--metrics", "MAE,maxFm"]) == 0
    header, *rows = rows_of(table.read_text())
    results = json.loads((out / "D1" / "results.json").read_text())
    assert header == ["Dataset", "Metric", *results]
    assert [row[0] for row in rows] == ["D1", "", "D2", ""]
    assert re.search(r"\d+\.\d+", rows[0][2]).group() == f"{results['ours']['MAE']:.3f}"


def test_latex_ci_marks_the_transposed_table_too(tmp_path: Path):
    """`eval --latex-ci --latex-transpose`: the cells of a method not significantly different
    from the baseline carry the dagger in its column, and the note is under the table."""
    import cv2
    import numpy as np

    from sodkit.metrics.testing import realistic_pair

    rng = np.random.default_rng(0)
    for i in range(12):
        pred, gt = realistic_pair(rng, 40, 50)
        for name, image in (("gt", gt), ("good", gt), ("fair", pred), ("copy", pred)):
            (tmp_path / name).mkdir(exist_ok=True)
            assert cv2.imwrite(str(tmp_path / name / f"im{i}.png"), image)
    tex = tmp_path / "table.tex"
    assert main(["eval", "--gt", str(tmp_path / "gt"), *(a for m in ("good", "fair", "copy")
                                                         for a in ("--pred", str(tmp_path / m))),
                 "--out", str(tmp_path / "out"), "--baseline", "fair", "--ci-resamples", "200",
                 "--latex", str(tex), "--latex-ci", "--latex-transpose",
                 "--metrics", "MAE,maxFm"]) == 0
    header, *rows = rows_of(tex.read_text())
    assert header == ["Dataset", "Metric", "good", "fair", "copy"] and len(rows) == 2
    for row in rows:  # copy: the baseline's maps again; good: a perfect method
        assert row[4].endswith("$^\\dagger$") and "dagger" not in row[2] + row[3], row
    assert "not significantly different from fair" in tex.read_text()
    page, again = tmp_path / "page.html", tmp_path / "again.tex"  # the report writes it alike
    assert main(["report", str(tmp_path / "out"), "--out", str(page), "--latex", str(again),
                 "--latex-ci", "--latex-transpose", "--metrics", "MAE,maxFm"]) == 0
    assert rows_of(again.read_text()) == [header, *rows]
