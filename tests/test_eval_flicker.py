"""``sodkit eval --groups --compute Flicker`` (#37 item 2): the temporal stability of a video's
masks (:mod:`sodkit.metrics.temporal`) on a crafted sequence whose answer is known by hand."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.errors import ConfigError
from sodkit.metrics.temporal import flicker_row


def _half(left: int, right: int) -> np.ndarray:
    out = np.empty((8, 8), np.uint8)
    out[:, :4], out[:, 4:] = left, right
    return out


# group -> frame name -> (GT, prediction). Group a: frames 1, 2, 10 (10 after 2, not after 1).
# (1, 2): the GT holds still everywhere, P changes by 51: 0.2. (2, 10): the GT's left half
# changes, so only the right half counts, where P goes 51 -> 153: 0.4. a's Flicker: 0.3 (in
# the names' sorted order 1, 10, 2 it would be (0.6 + 0.4) / 2 = 0.5). Group b: one frame, no
# Flicker, left out. Group c: nothing changes: 0. The dataset: (0.3 + 0) / 2 = 0.15.
SEQUENCE = {
    "a": {"frame1": (_half(0, 255), _half(0, 0)), "frame2": (_half(0, 255), _half(51, 51)),
          "frame10": (_half(255, 255), _half(0, 153))},
    "b": {"frame1": (_half(0, 255), _half(9, 99))},
    "c": {"f1": (_half(0, 255), _half(30, 200)), "f2": (_half(0, 255), _half(30, 200))},
}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    for group, frames in SEQUENCE.items():
        for name, (gt, pred) in frames.items():
            for folder, image in (("gt", gt), ("m", pred), ("truth", gt)):
                path = tmp_path / folder / group / f"{name}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(path), image)
    return tmp_path


def test_flicker_of_a_crafted_sequence(root):
    assert main(["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'm'}",
                 "--pred", f"truth={root / 'truth'}", "--out", str(root / "out"), "--groups",
                 "--compute", "Flicker"]) == 0
    results = json.loads((root / "out" / "results.json").read_text())
    assert abs(results["m"]["Flicker"] - 0.15) < 1e-12
    assert results["truth"]["Flicker"] == 0.0  # the GT itself does not flicker
    with open(root / "out" / "results_per_image.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row["method"] == "m"]
    by_frame = {row["stem"]: row["Flicker"] for row in rows}
    assert math.isnan(float(by_frame["a/frame1"]))  # a video's first frame: no previous one
    assert abs(float(by_frame["a/frame2"]) - 0.2) < 1e-12
    assert abs(float(by_frame["a/frame10"]) - 0.4) < 1e-12


def test_flicker_needs_groups_and_is_not_for_training(root, capsys):
    assert main(["eval", "--gt", str(root / "gt" / "a"), "--pred", f"m={root / 'm' / 'a'}",
                 "--out", str(root / "flat"), "--compute", "Flicker"]) == 2
    assert "give --groups" in capsys.readouterr().err
    from sodkit.metrics.keys import families_with

    with pytest.raises(ConfigError, match="not during training"):
        families_with(["Flicker"], "MAE")
    from sodkit.metrics.families import resolve

    assert "Flicker" not in resolve("all")  # named only: "all" is of the pairs alone


def test_a_row_where_the_truth_changes_everywhere_is_left_out():
    still = flicker_row(_half(0, 0), _half(255, 255), _half(0, 0), _half(0, 0))
    moved = flicker_row(_half(0, 0), _half(255, 255), _half(0, 0), _half(255, 255))
    assert still.tolist() == [1.0, 1.0] and moved[1] == 0.0


def test_flicker_is_the_same_whoever_measures_the_frames(tmp_path):
    """70 frames in 2 videos, measured by 2 worker processes (each a run of frames: a video's
    frames split between them) and in this process: the same Flicker to the bit."""
    rng = np.random.default_rng(5)
    for group, count in (("x", 40), ("y", 30)):
        gt = np.zeros((12, 12), np.uint8)
        for frame in range(count):
            gt[:, frame % 12] = 255 - gt[:, frame % 12]  # a column turns each frame
            pred = np.clip(gt.astype(int) + rng.integers(-40, 40, gt.shape), 0, 255)
            for folder, image in (("gt", gt), ("m", pred.astype(np.uint8))):
                path = tmp_path / folder / group / f"{frame}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(path), image)
    values = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}"
        assert main(["eval", "--gt", str(tmp_path / "gt"), "--pred", f"m={tmp_path / 'm'}",
                     "--out", str(out), "--groups", "--compute", "Flicker",
                     "--workers", workers]) == 0
        values.append(json.loads((out / "results.json").read_text())["m"]["Flicker"])
    assert values[0] == values[1] and 0.05 < values[0] < 0.3, values


def test_flicker_intervals_resample_videos(tmp_path):
    """``--ci`` with ``--groups`` resamples videos; videos of one frame (no Flicker) are left
    out of each resample's mean as of the dataset's: the interval is finite and holds the
    number in results.json, which ci.json repeats."""
    rng = np.random.default_rng(2)
    for video in range(12):
        for frame in range(1 + video % 3):  # a third of the videos have one frame
            gt = np.zeros((8, 8), np.uint8)
            gt[:, : frame + 2] = 255
            pred = np.clip(gt.astype(int) + rng.integers(-60, 60, gt.shape), 0, 255)
            for folder, image in (("gt", gt), ("m", pred.astype(np.uint8))):
                path = tmp_path / folder / f"v{video}" / f"{frame}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(path), image)
    assert main(["eval", "--gt", str(tmp_path / "gt"), "--pred", f"m={tmp_path / 'm'}",
                 "--out", str(tmp_path / "out"), "--groups", "--compute", "Flicker",
                 "--ci"]) == 0
    value = json.loads((tmp_path / "out" / "results.json").read_text())["m"]["Flicker"]
    interval = json.loads((tmp_path / "out" / "ci.json").read_text())["intervals"]["m"][
        "Flicker"]
    assert abs(interval["value"] - value) < 1e-12
    assert interval["low"] < value < interval["high"]
