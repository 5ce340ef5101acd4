"""Masks in another encoding than grey (0/1 label maps, 16-bit masks holding 0..255, a colour on
black, VOC palette label maps) are read as the masks they mean, with one line per folder that
says so, in ``sodkit eval``, training, test sets and ``check-data``; an encoding with no sure
reading (a colour image of several colours) is refused naming the cause. Before, each of them
binarised to an empty GT and every score was 0 without a word."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from sodkit.errors import DataError
from sodkit.imageio import read_mask
from sodkit.mask_encoding import take_notes
from tests import processes
from tests.sod_fixtures import write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's sodkit, from any folder
VOC = [0, 0, 0, 128, 0, 0] + [0, 0, 0] * 253 + [224, 224, 192]  # index 1: class 1, 255: void


def write_encoded(path: Path, mask: np.ndarray, kind: str) -> Path:
    """``mask`` (bool, H x W) written in encoding ``kind``; the file's path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    on = mask.astype(np.uint8)
    if kind == "voc":
        indices = on.copy()
        indices[0, :] = 255  # a "void" row, as VOC draws around objects
        image = Image.fromarray(indices, "P")
        image.putpalette(VOC)
        image.save(path)
        return path
    arrays = {
        "grey": on * 255, "labels": on, "labels16": on.astype(np.uint16),
        "wide16": on.astype(np.uint16) * 255,
        "red": np.dstack([np.zeros_like(on), np.zeros_like(on), on * 255]),  # BGR
        "heat": cv2.applyColorMap(on * 200 + 20, cv2.COLORMAP_JET),
    }
    assert cv2.imwrite(str(path), arrays[kind])
    return path


def ellipse(height: int = 40, width: int = 50) -> np.ndarray:
    mask = np.zeros((height, width), np.uint8)
    cv2.ellipse(mask, (width // 2, height // 2), (width // 4, height // 4), 0, 0, 360, 1, -1)
    return mask.astype(bool)


@pytest.mark.parametrize(("kind", "said"), [
    ("labels", "0/1 label maps"), ("labels16", "16-bit 0/1 label maps: read as 0/255"),
    ("wide16", "16-bit masks holding 0..255"), ("red", "single-colour masks on black"),
    ("voc", "palette label maps")])
def test_each_encoding_reads_as_the_mask_it_means(tmp_path, kind, said):
    mask = ellipse()
    expected = np.where(mask, 255, 0).astype(np.uint8)
    if kind == "voc":
        expected[0, :] = 255  # every non-black colour is object, VOC's void border too
    take_notes()
    assert np.array_equal(read_mask(write_encoded(tmp_path / "m.png", mask, kind)), expected)
    [((folder, note), count)] = take_notes().items()  # one file converted, in its folder
    assert (folder, count) == (str(tmp_path), 1) and note.startswith(said), note


def test_grey_files_read_as_before_and_count_nothing(tmp_path):
    """Grey, grey saved as RGB (JPEG chroma noise included), and an empty mask: as OpenCV's
    ``imread(p, 0)`` (PySODMetrics) reads them, and not counted as conversions."""
    mask = ellipse()
    soft = cv2.GaussianBlur(np.where(mask, 255, 0).astype(np.uint8), (7, 7), 2)
    cv2.imwrite(str(tmp_path / "soft.png"), soft)
    cv2.imwrite(str(tmp_path / "rgb.jpg"), cv2.cvtColor(soft, cv2.COLOR_GRAY2BGR))
    cv2.imwrite(str(tmp_path / "empty.png"), np.zeros((8, 8), np.uint8))
    cv2.imwrite(str(tmp_path / "empty16.png"), np.zeros((8, 8), np.uint16))
    take_notes()
    for name in ("soft.png", "rgb.jpg", "empty.png", "empty16.png"):
        assert np.array_equal(read_mask(tmp_path / name),
                              cv2.imread(str(tmp_path / name), cv2.IMREAD_GRAYSCALE)), name
    assert take_notes() == {}


def test_a_colour_image_of_several_colours_is_refused_naming_the_cause(tmp_path):
    path = write_encoded(tmp_path / "heat.png", ellipse(), "heat")
    with pytest.raises(DataError, match=r"heat\.png is a colour mask of several colours"):
        read_mask(path)


def _eval_folders(tmp_path: Path, count: int = 12) -> tuple[Path, Path]:
    """GT as 0/1 label maps; the method's predictions: the GT itself, 16-bit holding 0..255."""
    rng = np.random.default_rng(0)
    for i in range(count):
        mask = ellipse(int(rng.integers(30, 60)), int(rng.integers(30, 60)))
        write_encoded(tmp_path / "gt" / f"im{i:02d}.png", mask, "labels")
        write_encoded(tmp_path / "pred" / f"im{i:02d}.png", mask, "wide16")
    return tmp_path / "gt", tmp_path / "pred"


@pytest.mark.parametrize("workers", ["1", "2"])  # in the command's process; worker processes
def test_sodkit_eval_reads_label_maps_and_says_so_once_per_folder(tmp_path, workers):
    gt, pred = _eval_folders(tmp_path)
    proc = processes.run([sys.executable, "-m", "sodkit", "eval", "--gt", str(gt), "--pred",
                          f"m={pred}", "--out", str(tmp_path / "out"), "--workers", workers],
                         env=ENV)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((tmp_path / "out" / "results.json").read_text())["m"]
    assert scores["MAE"] == 0 and scores["maxFm"] == pytest.approx(1.0), scores
    said = [line for line in proc.stderr.splitlines() if "masks are" in line]
    assert len(said) == 2, proc.stderr  # one per folder, not one per file
    assert f"{gt}: 12 masks are 0/1 label maps: read as 0/255" in said[0]
    assert f"{pred}: 12 masks are 16-bit masks holding 0..255" in said[1]


def _encoded_layout(tmp_path: Path, train: str, test: str) -> Path:
    """A DUTS layout whose training and test masks are rewritten in the given encodings."""
    root = write_duts_layout(tmp_path / "data", n_train=6, n_test=4)
    for split, kind in (("TR", train), ("TE", test)):
        for path in (root / f"DUTS-{split}" / f"DUTS-{split}-Mask").iterdir():
            write_encoded(path, cv2.imread(str(path), cv2.IMREAD_GRAYSCALE) > 128, kind)
    return root


def test_training_and_test_sets_read_encoded_masks_and_say_so(tmp_path, caplog):
    from sodkit.config import load_config
    from sodkit.data import build_test_loaders, build_train_dataset

    root = _encoded_layout(tmp_path, train="red", test="labels")
    cfg = load_config(DEMO, [f"data_root={root}", "data.train=[{preset: duts-tr}]",
                             "data.test=[{preset: duts-te}]", "data.num_workers=0"])
    with caplog.at_level(logging.WARNING):
        train = build_train_dataset(cfg)
        batch = next(iter(build_test_loaders(cfg)["DUTS-TE"]))
    assert float(train[0]["mask"].max()) == 1.0  # red read as object, not as grey 76
    assert all(gt.max() == 255 for gt in batch["gt"])
    lines = [r.getMessage() for r in caplog.records if "masks are" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("train set DUTS-TR: ") and "6 of 6 sampled masks are single" \
        "-colour masks on black" in lines[0]
    assert lines[1].startswith("test set DUTS-TE: ") and "4 of 4 masks are 0/1 label maps" \
        in lines[1]


def test_check_data_names_encodings_and_refuses_what_has_no_sure_reading(tmp_path):
    root = _encoded_layout(tmp_path, train="labels", test="heat")
    proc = processes.run([sys.executable, "-m", "sodkit", "check-data", DEMO,
                          f"data_root={root}", "data.train=[{preset: duts-tr}]",
                          "data.test=[{preset: duts-te}]"], env=ENV)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DUTS-TR-Mask: 6 of 6 sampled masks are 0/1 label maps: read as 0/255" in proc.stdout
    assert "is a colour mask of several colours" in proc.stdout
    assert "4 problem(s), 1 warning(s)" in proc.stdout
