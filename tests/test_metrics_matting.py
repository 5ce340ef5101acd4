"""The matting family (issue 38, item 2): SAD, MSE, MAD, Grad and Conn equal to the Deep Image
Matting benchmark's definitions (mmagic 1.2.0's port of Adobe's evaluate.m, rebuilt from the
formulas in tests/matting_oracle.py) on generated mattes (hair-like strands, semi-transparent
veils, empty and full mattes), whole-image and over a trimap's unknown region; per image in
results_per_image.csv with --ci intervals; a trimap without unknown pixels is refused by name."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics import SODMetrics
from sodkit.metrics.matting import KEYS, EmptyRegion, matting_errors
from tests.matting_oracle import oracle, strands, trimap_of

TOLERANCE = 1e-12  # relative; measured: at most 1e-15 (summation order only)


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    cases = []
    for seed in range(3):
        pred, gt = strands(96, seed)
        cases.append((f"strands{seed}", pred, gt))
    empty, full = np.zeros((48, 64), np.uint8), np.full((48, 64), 255, np.uint8)
    veil = np.full((48, 64), 115, np.uint8)  # semi-transparent everywhere (constant)
    soft = cv2.GaussianBlur(strands(64, 7)[1], (0, 0), 3)[:48]
    cases += [("empty-empty", empty, empty), ("full-full", full, full),
              ("empty-full", empty, full), ("full-empty", full, empty),
              ("veil-soft", veil, soft), ("soft-empty", soft, empty),
              ("empty-soft", empty, soft)]
    return cases


@pytest.mark.parametrize("with_trimap", [False, True], ids=["whole", "trimap"])
def test_every_metric_equals_the_reference_definition(with_trimap: bool) -> None:
    for name, pred, gt in _cases():
        trimap = trimap_of(gt) if with_trimap else None
        if trimap is not None and not (trimap == 128).any():
            with pytest.raises(EmptyRegion, match="no unknown pixel"):
                matting_errors(pred, gt, trimap)
            continue
        ours = matting_errors(pred, gt, trimap)
        reference = oracle(pred, gt, trimap)
        for i, key in enumerate(KEYS):
            assert np.isfinite(ours[i]), (name, key)
            assert ours[i] == pytest.approx(reference[key], rel=TOLERANCE, abs=1e-15), \
                (name, key)


def test_the_metrics_see_what_they_should() -> None:
    """Equal mattes score 0; a GT of 0.45 everywhere against an empty prediction: SAD = 0.45 x
    pixels / 1000, MSE = 0.45^2 x 1000, MAD = 450; trimaps restrict the sums."""
    gt = np.full((40, 50), 115, np.uint8)  # 115 / 255 = 0.451
    assert not matting_errors(gt, gt).any()
    sad, mse, mad, grad, conn = matting_errors(np.zeros_like(gt), gt)
    value = 115 / 255
    assert sad == pytest.approx(value * 2000 / 1000)
    assert mse == pytest.approx(value ** 2 * 1000)
    assert mad == pytest.approx(value * 1000)
    assert grad == 0  # both constant: no gradient anywhere
    trimap = np.zeros_like(gt)
    trimap[10:20, 10:20] = 128
    assert matting_errors(np.zeros_like(gt), gt, trimap)[0] == pytest.approx(value * 100 / 1000)


def test_ties_between_largest_components_break_as_the_reference() -> None:
    """Two equal components: the first in raster order is the largest (bwconncomp, OpenCV and
    SciPy agree), so Conn is the oracle's."""
    gt = np.zeros((30, 30), np.uint8)
    gt[2:10, 2:10] = 200
    gt[15:23, 15:23] = 230
    pred = gt.copy()
    pred[15:23, 15:23] = 150
    pred[5, 5] = 60
    assert matting_errors(pred, gt)[4] == pytest.approx(oracle(pred, gt)["Conn"], rel=1e-12)


def _write(folder: Path, arrays: dict[str, np.ndarray]) -> Path:
    folder.mkdir(parents=True)
    for stem, array in arrays.items():
        cv2.imwrite(str(folder / f"{stem}.png"), array)
    return folder


def test_eval_compute_matting_with_trimaps_per_image_and_ci(tmp_path: Path) -> None:
    cases = {f"s{seed}": strands(64, seed) for seed in range(10)}  # --ci needs 10 images
    gt = _write(tmp_path / "gt", {k: g for k, (_, g) in cases.items()})
    pred = _write(tmp_path / "pred", {k: p for k, (p, _) in cases.items()})
    trimaps = _write(tmp_path / "trimaps", {k: trimap_of(g) for k, (_, g) in cases.items()})
    base = ["eval", "--gt", str(gt), "--pred", f"m={pred}", "--compute", "matting",
            "--workers", "1"]
    assert main([*base, "--out", str(tmp_path / "whole")]) == 0
    assert main([*base, "--out", str(tmp_path / "tri"), "--trimaps", str(trimaps),
                 "--ci", "--ci-resamples", "200", "--workers", "2"]) == 0  # worker processes
    for out, with_trimap in (("whole", False), ("tri", True)):
        result = json.loads((tmp_path / out / "results.json").read_text())["m"]
        rows = list(csv.DictReader((tmp_path / out / "results_per_image.csv").open()))
        for row in rows:
            p, g = cases[row["stem"]]
            reference = oracle(p, g, trimap_of(g) if with_trimap else None)
            for key in KEYS:
                assert float(row[key]) == pytest.approx(reference[key], rel=1e-9), key
        for key in KEYS:
            assert result[key] == pytest.approx(np.mean([float(r[key]) for r in rows]))
    ci = json.loads((tmp_path / "tri" / "ci.json").read_text())
    assert "SAD" in json.dumps(ci)


def test_a_trimap_without_unknown_pixels_is_refused_by_name(tmp_path: Path, capsys) -> None:
    pred, gt = strands(48, 1)
    folders = [_write(tmp_path / n, {"a": a}) for n, a in
               (("gt", gt), ("pred", pred), ("trimaps", np.where(gt > 128, 255, 0)
                                                 .astype(np.uint8)))]
    code = main(["eval", "--gt", str(folders[0]), "--pred", f"m={folders[1]}", "--compute",
                 "matting", "--trimaps", str(folders[2]), "--out", str(tmp_path / "o"),
                 "--workers", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "trimaps/a.png has no unknown pixel (value 128)" in err and "nan" not in err.lower()


def test_sodmetrics_takes_trimaps_per_image() -> None:
    (p1, g1), (p2, g2) = strands(40, 1), strands(40, 2)
    metrics = SODMetrics(families="matting")
    metrics.update(np.stack([p1, p2]), np.stack([g1, g2]), trimap=[trimap_of(g1), None])
    values = metrics.per_image()
    assert values["SAD"][0] == pytest.approx(oracle(p1, g1, trimap_of(g1))["SAD"])
    assert values["SAD"][1] == pytest.approx(oracle(p2, g2)["SAD"])
