"""``sodkit eval`` run again into its own folder (#33): what the folder held and this run leaves
out is named in a warning before any image is measured, and a paper table written from the
earlier results is said to be out of date at every later run until it is rewritten (it used to
replace the 3-method results with 1-method ones, and leave the LaTeX table stale, silently)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair

METHODS = ("A", "B", "C")


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    rng = np.random.default_rng(6)
    for i in range(4):
        pred, gt = realistic_pair(rng, 24, 30)
        for dataset in ("D1", "D2"):
            for name, image in (("gt", gt), ("A", pred), ("B", 255 - pred), ("C", gt)):
                folder = tmp_path / name / dataset
                folder.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(folder / f"im{i}.png"), image)
    return tmp_path


def evaluate(root: Path, caplog, methods=METHODS, datasets=("D1", "D2"), *extra: str) -> str:
    caplog.clear()
    args = ["eval", "--out", str(root / "ev"), *extra]
    args += [a for d in datasets for a in ("--gt", f"{d}={root / 'gt' / d}")]
    args += [a for m in methods for a in ("--pred", str(root / m))]
    assert main(args) == 0
    return caplog.text


def test_fewer_methods_say_what_is_dropped_and_the_table_is_out_of_date(root, caplog):
    table = root / "paper.tex"
    assert "held results" not in evaluate(root, caplog, METHODS, ("D1", "D2"), "--latex",
                                          str(table))
    text = evaluate(root, caplog, ("A",), ("D1",))
    assert "held results of B, C on D1; A, B, C on D2, which this evaluation leaves out" in text
    assert f"{table.resolve()} shows results that {root / 'ev'} no longer holds" in text
    assert list(json.loads((root / "ev" / "D1" / "results.json").read_text())) == ["A"]
    again = evaluate(root, caplog, ("A",), ("D1",))
    assert "held results" not in again and "out of date" in again  # until rewritten
    rewritten = evaluate(root, caplog, ("A",), ("D1",), "--latex", str(table))
    assert "out of date" not in rewritten
    assert "out of date" not in evaluate(root, caplog, ("A",), ("D1",))


def test_the_same_evaluation_again_says_nothing_and_a_table_rewritten_elsewhere_is_forgotten(
        root, caplog):
    table = root / "paper.tex"
    evaluate(root, caplog, METHODS, ("D1",), "--latex", str(table))
    text = evaluate(root, caplog, METHODS, ("D1",))
    assert "held results" not in text and "out of date" not in text
    assert main(["report", str(root / "ev"), "--out", str(root / "page.html"), "--latex",
                 str(table)]) == 0  # the report rewrites it from the same folder
    table.write_text(table.read_text() + "% edited\n")
    assert "out of date" not in evaluate(root, caplog, ("A",), ("D1",))
