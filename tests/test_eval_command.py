"""``sodkit eval`` end to end on PNG folders, against PySODMetrics on the same files (with the
resize PySODEvalToolkit applies to predictions of another size)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from tests.metrics_fixtures import assert_matches_reference, reference_metrics

SIZES = [(60, 80), (45, 45), (71, 50), (60, 80), (33, 90)]


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)


@pytest.fixture()
def folders(tmp_path: Path) -> dict[str, Path]:
    """GT folder, method "a" at GT size, method "b" at other sizes (needs resizing)."""
    rng = np.random.default_rng(0)
    for i, (h, w) in enumerate(SIZES):
        pred, gt = realistic_pair(rng, h, w)
        write_png(tmp_path / "gt" / f"img{i}.png", gt)
        write_png(tmp_path / "a" / f"img{i}.png", pred)
        small = cv2.resize(pred, (w // 2 + 1, h // 2), interpolation=cv2.INTER_AREA)
        write_png(tmp_path / "b" / f"img{i}.png", small)
    return {name: tmp_path / name for name in ("gt", "a", "b")}


def reference_for(gt_dir: Path, pred_dir: Path) -> dict:
    pairs = []
    for gt_path in sorted(gt_dir.glob("*.png")):
        gt = cv2.imread(str(gt_path), cv2.IMREAD_GRAYSCALE)
        pred = cv2.imread(str(pred_dir / gt_path.name), cv2.IMREAD_GRAYSCALE)
        if pred.shape != gt.shape:
            pred = cv2.resize(pred, dsize=gt.shape[::-1], interpolation=cv2.INTER_LINEAR)
        pairs.append((pred, gt))
    return reference_metrics(pairs)


def test_eval_matches_pysodmetrics_with_resized_predictions(folders, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}",
                 "--pred", str(folders["b"]), "--out", str(out)])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert list(results) == ["A", "b"]
    for method, folder in (("A", folders["a"]), ("b", folders["b"])):
        assert_matches_reference(results[method], {
            k: v for k, v in reference_for(folders["gt"], folder).items()
            if not k.endswith("_curve")})
    header = (out / "results.md").read_text().splitlines()[0]
    assert header.startswith("| method | MAE | Smeasure | wFmeasure | maxFm |")
    assert (out / "results.csv").read_text().splitlines()[0].startswith("method,MAE,Smeasure")
    assert (out / "pr.png").stat().st_size > 0 and (out / "fm.png").stat().st_size > 0
    assert "| A |" in capsys.readouterr().out


def test_missing_prediction_is_an_error_listing_stems(folders, tmp_path, capsys):
    (folders["a"] / "img3.png").unlink()
    (folders["a"] / "img1.png").unlink()
    code = main(["eval", "--gt", str(folders["gt"]), "--pred", str(folders["a"]),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "2 of 5 predictions missing" in err and "img1, img3" in err


def test_extra_prediction_is_a_warning(folders, tmp_path, caplog):
    write_png(folders["a"] / "stray.png", np.zeros((5, 5), np.uint8))
    with caplog.at_level(logging.WARNING):
        code = main(["eval", "--gt", str(folders["gt"]), "--pred", str(folders["a"]),
                     "--out", str(tmp_path / "out")])
    assert code == 0
    assert "stray" in caplog.text


def test_missing_gt_folder_is_an_error(tmp_path, capsys):
    code = main(["eval", "--gt", str(tmp_path / "nope"), "--pred", str(tmp_path),
                 "--out", str(tmp_path / "out")])
    assert code == 2
    assert "folder not found" in capsys.readouterr().err


def test_several_datasets(folders, tmp_path):
    root = tmp_path / "methods"
    for dataset in ("D1", "D2"):
        for path in folders["a"].glob("*.png"):
            write_png(root / "m" / dataset / path.name, cv2.imread(str(path), 0))
    out = tmp_path / "out"
    code = main(["eval", "--gt", f"D1={folders['gt']}", "--gt", f"D2={folders['gt']}",
                 "--pred", f"m={root / 'm'}", "--out", str(out)])
    assert code == 0
    combined = json.loads((out / "results.json").read_text())
    assert list(combined) == ["D1/m", "D2/m"]
    assert combined["D1/m"] == combined["D2/m"]
    per_dataset = json.loads((out / "D1" / "results.json").read_text())
    assert per_dataset["m"] == combined["D1/m"]
    assert (out / "D2" / "pr.png").exists()
