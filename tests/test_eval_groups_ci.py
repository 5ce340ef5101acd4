"""``sodkit eval --groups --ci`` (#25): with video / co-salient datasets the numbers are averages
over groups, so the bootstrap resamples groups (a cluster bootstrap), each weighing the same;
and ``--ci`` with ``--allow-missing`` is refused in one line when a method lacks images (its
comparisons are paired)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics import STANDARD_KEYS, SODMetrics
from sodkit.metrics.bootstrap import resample_weights, resampled_values
from sodkit.metrics.testing import realistic_pair

GROUPS, FRAMES = 10, 3


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    rng = np.random.default_rng(21)
    for g in range(GROUPS):
        for frame in range(1, FRAMES + 1):
            pred, gt = realistic_pair(rng, 24 + g % 2, 30)
            for method, image in (("gt", gt), ("m", pred), ("copy", pred), ("good", gt)):
                path = tmp_path / method / f"v{g}" / f"frame{frame}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(path), image)
    return tmp_path


def test_groups_are_resampled_and_the_values_are_the_group_averages(root, capsys):
    out = root / "out"
    preds = [a for m in ("m", "copy", "good") for a in ("--pred", f"{m}={root / m}")]
    assert main(["eval", "--gt", str(root / "gt"), *preds, "--out", str(out), "--groups",
                 "--baseline", "m", "--ci-resamples", "200", "--compute", "BIoU"]) == 0
    ci = json.loads((out / "ci.json").read_text())
    results = json.loads((out / "results.json").read_text())
    assert (ci["groups"], ci["images"]) == (GROUPS, GROUPS * FRAMES)
    assert ci["method"] == "percentile bootstrap over groups"
    for method, values in results.items():
        for key, value in values.items():  # the intervals belong to the printed numbers
            interval = ci["intervals"][method][key]
            assert interval["value"] == pytest.approx(value, nan_ok=True), (method, key)
    mae = ci["intervals"]["m"]["MAE"]
    assert mae["low"] < mae["value"] < mae["high"]
    assert ci["comparisons"]["copy"]["maxFm"]["difference"] == 0
    assert not ci["comparisons"]["copy"]["maxFm"]["excludes_zero"]
    assert ci["comparisons"]["good"]["maxFm"]["excludes_zero"]
    assert ci["comparisons"]["good"]["maxBIoU"]["difference"] > 0
    assert "200 resamples of 10 groups (30 images)" in capsys.readouterr().out
    assert main(["report", str(out), "--out", str(root / "page.html"), "--ci"]) == 0
    assert "200 resamples of 10 groups (30 images)" in (root / "page.html").read_text()


def test_a_group_bootstrap_weighs_groups_not_images():
    rng = np.random.default_rng(4)
    metrics = SODMetrics(families="MSE")
    for _ in range(10):
        pred, gt = realistic_pair(rng, 20, 24)
        metrics.update(pred, gt)
    records = metrics.records()
    keys, plain = resampled_values(records, 100, seed=3)
    same, single = resampled_values(records, 100, seed=3, groups=np.arange(10))
    assert same == keys and np.array_equal(single, plain)  # groups of one image: images
    groups = np.array([0, 0, 0, 0, 0, 0, 0, 1, 2, 2])  # unequal sizes, equal weights
    _, grouped = resampled_values(records, 100, seed=3, groups=groups)
    per_image = records.scalars[:, 0]  # MAE
    group_mae = np.array([per_image[groups == g].mean() for g in range(3)])
    weights = np.concatenate(list(resample_weights(3, 100, 3)))
    expected = weights @ group_mae / 3
    assert np.allclose(grouped[:, keys.index("MAE")], expected, rtol=0, atol=1e-15)
    assert set(STANDARD_KEYS) <= set(keys) and "MSE" in keys


def test_ci_with_a_method_lacking_images_is_one_line_before_any_work(root, capsys):
    (root / "copy" / "v2" / "frame1.png").unlink()
    out = root / "out"
    assert main(["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'm'}", "--pred",
                 f"copy={root / 'copy'}", "--out", str(out), "--groups", "--allow-missing",
                 "--ci"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("sodkit eval: error: --ci resamples the images every method has; method "
                       f"'copy' lacks 1 of 30 in dataset {root.name} (--allow-missing): leave "
                       "out --ci, that method, or those images (--list)")
    assert not out.exists()
