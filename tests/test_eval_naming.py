"""``sodkit eval`` on published prediction folders: prefixes, suffixes, per-method patterns and
methods files give the numbers of renamed files; ambiguity is an error naming both files; the
per-image scores and the paper tables it writes."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair

SIZES = [(60, 80), (45, 45), (71, 50), (33, 90)]


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)


@pytest.fixture()
def data(tmp_path: Path) -> Path:
    """gt/, plain/ (<stem>.png), sal/ (<stem>_sal.png), pre/ (res_<stem>.png), other/."""
    rng = np.random.default_rng(3)
    for i, (h, w) in enumerate(SIZES):
        pred, gt = realistic_pair(rng, h, w)
        write_png(tmp_path / "gt" / f"im{i}.png", gt)
        write_png(tmp_path / "plain" / f"im{i}.png", pred)
        write_png(tmp_path / "sal" / f"im{i}_sal.png", pred)
        write_png(tmp_path / "pre" / f"res_im{i}.png", pred)
        write_png(tmp_path / "other" / f"im{i}.png", 255 - pred)
    return tmp_path


def evaluate(data: Path, *args: str, out: str = "out") -> dict:
    assert main(["eval", "--gt", str(data / "gt"), *args, "--out", str(data / out)]) == 0
    return json.loads((data / out / "results.json").read_text())


def test_pred_suffix_gives_the_numbers_of_renamed_files(data):
    renamed = evaluate(data, "--pred", f"m={data / 'plain'}", out="renamed")["m"]
    assert evaluate(data, "--pred", f"m={data / 'sal'}", "--pred-suffix", "_sal")["m"] == renamed
    assert evaluate(data, "--pred", f"m={data / 'sal'}:_sal", out="o2")["m"] == renamed
    assert evaluate(data, "--pred", f"m={data / 'sal'}", "--pred-suffix", "_sal.png",
                    out="o3")["m"] == renamed
    assert evaluate(data, "--pred", f"m={data / 'pre'}:res_{{stem}}", out="o4")["m"] == renamed
    assert evaluate(data, "--pred", f"m={data / 'pre'}", "--pred-prefix", "res_",
                    out="o5")["m"] == renamed


def test_methods_file_with_a_per_dataset_folder(data):
    gt = data / "gt"
    methods = data / "methods.yaml"
    methods.write_text(
        "methods:\n"
        "  - {name: S, folder: sal, suffix: _sal}\n"        # relative to the file's folder
        "  - name: P\n    folder: nowhere\n"
        "    datasets: {B: {folder: pre, prefix: res_}, A: {folder: plain}}\n")
    out = data / "out"
    assert main(["eval", "--gt", f"A={gt}", "--gt", f"B={gt}", "--methods", str(methods),
                 "--pred", f"plain={data}", "--out", str(out)]) == 2  # plain/A is no folder
    for dataset in ("A", "B"):
        for path in (data / "sal").glob("*_sal.png"):
            write_png(data / "s" / dataset / path.name, cv2.imread(str(path), 0))
    methods.write_text(methods.read_text().replace("folder: sal", "folder: s"))
    assert main(["eval", "--gt", f"A={gt}", "--gt", f"B={gt}", "--methods", str(methods),
                 "--out", str(out)]) == 0
    combined = json.loads((out / "results.json").read_text())
    assert combined["A/S"] == combined["B/S"] == combined["A/P"] == combined["B/P"]
    assert json.loads((out / "evaluation.json").read_text())["datasets"] == {"A": "A", "B": "B"}


def test_two_files_matching_one_gt_are_an_error_naming_both(data, capsys):
    write_png(data / "sal" / "im2_sal.jpg", np.zeros((71, 50), np.uint8))
    code = main(["eval", "--gt", str(data / "gt"), "--pred", f"{data / 'sal'}:_sal",
                 "--out", str(data / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "im2_sal.jpg" in err and "im2_sal.png" in err and "'im2'" in err
    assert not (data / "out").exists()


def test_a_colon_that_could_be_part_of_the_folder_is_an_error(data, capsys):
    (data / "sal:_sal").mkdir()
    code = main(["eval", "--gt", str(data / "gt"), "--pred", f"m={data / 'sal'}:_sal",
                 "--out", str(data / "out")])
    assert code == 2 and "ambiguous" in capsys.readouterr().err


def test_methods_file_errors_name_the_key(data, capsys):
    methods = data / "m.json"
    methods.write_text(json.dumps([{"name": "a", "folder": "plain", "sufix": "_x"}]))
    assert main(["eval", "--gt", str(data / "gt"), "--methods", str(methods),
                 "--out", str(data / "out")]) == 2
    assert "sufix" in capsys.readouterr().err
    methods.write_text(json.dumps([{"name": "../a", "folder": "plain"}]))
    assert main(["eval", "--gt", str(data / "gt"), "--methods", str(methods),
                 "--out", str(data / "out")]) == 2
    assert not (data / "out").exists()


def test_per_image_scores_latex_and_report_of_an_eval(data, tmp_path):
    tex, sheet, page = data / "t.tex", data / "t.xlsx", data / "r.html"
    results = evaluate(data, "--pred", f"good={data / 'plain'}", "--pred",
                       f"bad={data / 'other'}", "--latex", str(tex), "--xlsx", str(sheet))
    with open(data / "out" / "results_per_image.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for method in ("good", "bad"):
        mae = [float(r["MAE"]) for r in rows if r["method"] == method]
        assert len(mae) == len(SIZES)
        assert abs(np.mean(mae) - results[method]["MAE"]) <= 1e-12
    text = tex.read_text()
    assert "good & \\textbf{" in text and text.count("\\textbf{") == 5  # good wins all five
    assert sheet.stat().st_size > 0
    assert main(["report", str(data / "out"), "--out", str(page)]) == 0
    html = page.read_text()
    assert 'id="comparison"' in html and 'data-method="good"' in html
    assert len(re.findall(r'<td[^>]*class="rank1"', html)) == 5


def test_latex_output_is_never_written_into_an_input(data, capsys):
    code = main(["eval", "--gt", str(data / "gt"), "--pred", str(data / "plain"),
                 "--out", str(data / "out"), "--latex", str(data / "plain" / "t.tex")])
    assert code == 2 and "input" in capsys.readouterr().err
    assert not (data / "plain" / "t.tex").exists() and not (data / "out").exists()
