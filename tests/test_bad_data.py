"""The bad-input catalogue: each broken or unusual file ends in the documented behaviour.

Training skips bad pairs with a warning naming each file; evaluation refuses a test set with a bad
pair before writing any prediction; ``sodkit check-data`` lists every problem (exit 1); unusual
but valid files (CMYK JPEG, 16-bit PNG, RGBA, palette, WebP, GIF, EXIF-rotated photos) work.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageOps

from sodkit.data.checks import check_pairs
from sodkit.data.pairs import Pair
from sodkit.errors import DataError, UserError
from sodkit.imageio import read_image, read_mask
from tests.sod_fixtures import draw_pair, tiny_overrides, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])


@pytest.fixture
def broken_root(tmp_path: Path) -> Path:
    """DUTS layout whose training split holds one file of each kind of trouble."""
    root = write_duts_layout(tmp_path / "data", n_train=16, n_test=4)
    images, masks = root / "DUTS-TR" / "DUTS-TR-Image", root / "DUTS-TR" / "DUTS-TR-Mask"
    truncate(images / "sun_tr_000.jpg")
    (masks / "sun_tr_001.png").write_bytes(b"")
    (images / "sun_tr_002.jpg").write_text("this is a text file, not a photo\n")
    cv2.imwrite(str(masks / "sun_tr_003.png"), np.zeros((7, 9), np.uint8))
    (images / "orphan.jpg").write_bytes((images / "sun_tr_004.jpg").read_bytes())
    # unusual but valid: these must train
    rgb = read_image(images / "sun_tr_005.jpg")
    Image.fromarray(rgb).convert("CMYK").save(images / "sun_tr_005.jpg")
    cv2.imwrite(str(masks / "sun_tr_006.png"),
                read_mask(masks / "sun_tr_006.png").astype(np.uint16) * 257)
    Image.fromarray(read_image(images / "sun_tr_007.jpg")).convert("RGBA").save(
        images / "sun_tr_007.png")
    (images / "sun_tr_007.jpg").unlink()
    Image.fromarray(read_image(images / "sun_tr_008.jpg")).convert("P").save(
        images / "sun_tr_008.png")
    (images / "sun_tr_008.jpg").unlink()
    Image.fromarray(read_image(images / "sun_tr_009.jpg")).save(images / "sun_tr_009.webp")
    (images / "sun_tr_009.jpg").unlink()
    return root


def test_training_skips_each_bad_pair_and_names_it(broken_root, tmp_path, run_cli):
    overrides = tiny_overrides(broken_root, tmp_path / "out", "run", epochs=1) + [
        "data.test=[]", "data.batch_size=13", "data.max_bad_samples=4"]  # 13 good: one batch
    proc = run_cli("train", DEMO, *overrides, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    for culprit, why in [("sun_tr_001.png", "empty"), ("sun_tr_002.jpg", "not an image"),
                         ("sun_tr_003", "7x9"), ("orphan", "without a mask")]:
        line = next((ln for ln in log.splitlines() if culprit in ln), "")
        assert why in line, (culprit, log[-3000:])
    # the truncated JPEG passes the header check; decoding it fails and another pair stands in
    assert "sun_tr_000.jpg" in log and "truncated" in log and "another pair" in log
    assert "Traceback" not in log


def test_too_many_bad_pairs_stop_the_run_before_training(broken_root, tmp_path, run_cli):
    overrides = tiny_overrides(broken_root, tmp_path / "out", "run", epochs=1) + [
        "data.test=[]", "data.max_bad_samples=2"]
    proc = run_cli("train", DEMO, *overrides, cwd=tmp_path)
    assert proc.returncode == 2
    assert "data.max_bad_samples=2" in proc.stderr and "check-data" in proc.stderr
    assert not (tmp_path / "out" / "run" / "checkpoints").exists()


def test_a_worker_that_meets_a_bad_file_reports_one_line(broken_root, tmp_path, run_cli):
    overrides = tiny_overrides(broken_root, tmp_path / "out", "run", epochs=1) + [
        "data.test=[]", "data.batch_size=13", "data.num_workers=1", "data.max_bad_samples=3"]
    proc = run_cli("train", DEMO, *overrides, cwd=tmp_path)
    assert proc.returncode == 2
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "sun_tr_000.jpg" in errors[0] and "truncated" in errors[0]
    assert "Traceback" not in proc.stderr and "Original" not in proc.stderr


def test_check_data_lists_every_problem(broken_root, tmp_path, run_cli):
    common = [f"data_root={broken_root}", "data.train=[{preset: duts-tr}]",
              "data.test=[{preset: duts-te}]"]
    fast = run_cli("check-data", DEMO, *common, cwd=tmp_path)
    assert fast.returncode == 1, fast.stderr
    for culprit in ["sun_tr_001.png", "sun_tr_002.jpg", "sun_tr_003", "orphan.jpg"]:
        assert culprit in fast.stdout, culprit
    assert "sun_tr_000" not in fast.stdout  # headers alone cannot see the truncation
    full = run_cli("check-data", DEMO, *common, "--full", cwd=tmp_path)
    assert full.returncode == 1 and "sun_tr_000.jpg" in full.stdout and "truncated" in full.stdout
    for valid in ["sun_tr_005", "sun_tr_006", "sun_tr_007", "sun_tr_008", "sun_tr_009"]:
        assert valid not in full.stdout, valid
    clean = run_cli("check-data", DEMO, f"data_root={write_duts_layout(tmp_path / 'ok')}",
                    "data.train=[{preset: duts-tr}]", "data.test=[]", "--full", cwd=tmp_path)
    assert clean.returncode == 0 and "0 problem(s)" in clean.stdout


def test_check_data_names_missing_and_empty_folders(tmp_path, run_cli):
    root = write_duts_layout(tmp_path / "data")
    shutil.rmtree(root / "DUTS-TR" / "DUTS-TR-Mask")
    for f in (root / "DUTS-TE" / "DUTS-TE-Image").iterdir():
        f.unlink()
    proc = run_cli("check-data", DEMO, f"data_root={root}", "data.train=[{preset: duts-tr}]",
                   "data.test=[{preset: duts-te}]", cwd=tmp_path)
    assert proc.returncode == 1
    assert "DUTS-TR-Mask" in proc.stdout and "folder not found" in proc.stdout
    assert "no images in the folder" in proc.stdout and "DUTS-TE-Image" in proc.stdout
    train = run_cli("train", DEMO, *tiny_overrides(root, tmp_path / "o", "r"), cwd=tmp_path)
    assert train.returncode == 2 and "DUTS-TR-Mask" in train.stderr
    assert "Traceback" not in train.stderr


def test_a_bad_test_pair_stops_evaluation_before_any_prediction(trained, tmp_path, run_cli):
    root = write_duts_layout(tmp_path / "data", n_train=4, n_test=5)
    truncate(root / "DUTS-TE" / "DUTS-TE-Image" / "sun_te_003.jpg")
    overrides = tiny_overrides(root, tmp_path / "out", "t")
    proc = run_cli("test", DEMO, *overrides, "--checkpoint",
                   str(trained / "checkpoints" / "last.pt"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "sun_te_003.jpg" in proc.stderr and "whole" in proc.stderr
    assert not list((tmp_path / "out").rglob("*.png"))


def test_unusual_valid_files_read_like_their_rgb_originals(tmp_path):
    rng = np.random.default_rng(0)
    rgb, _ = draw_pair(rng, 30, 40)
    Image.fromarray(rgb).save(tmp_path / "a.webp", lossless=True)
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=256).save(
        tmp_path / "a.gif")
    Image.fromarray(rgb).convert("RGBA").save(tmp_path / "a.png")
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "a.jpg", quality=100)
    assert np.array_equal(read_image(tmp_path / "a.webp"), rgb)
    assert np.array_equal(read_image(tmp_path / "a.png"), rgb)
    gif = np.asarray(Image.open(tmp_path / "a.gif").convert("RGB"))
    assert np.array_equal(read_image(tmp_path / "a.gif"), gif)
    cmyk = np.asarray(Image.open(tmp_path / "a.jpg").convert("RGB")).astype(int)
    assert np.abs(read_image(tmp_path / "a.jpg").astype(int) - cmyk).mean() < 3


@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_like_an_image_viewer(tmp_path, orientation):
    stored = np.random.default_rng(orientation).integers(0, 256, (24, 36, 3), dtype=np.uint8)
    image = Image.fromarray(stored)
    exif = image.getexif()
    exif[0x0112] = orientation
    image.save(tmp_path / "photo.png", exif=exif)
    shown = np.asarray(ImageOps.exif_transpose(Image.open(tmp_path / "photo.png")))
    assert np.array_equal(read_image(tmp_path / "photo.png"), shown)


def test_a_mask_drawn_on_the_displayed_photo_aligns(tmp_path):
    rng = np.random.default_rng(3)
    shown, mask = draw_pair(rng, 64, 64)  # a square photo: a size check cannot catch rotation
    stored = np.ascontiguousarray(np.rot90(shown, k=1))  # orientation 6 turns it back
    image = Image.fromarray(stored)
    exif = image.getexif()
    exif[0x0112] = 6
    image.save(tmp_path / "photo.jpg", exif=exif, quality=100)
    cv2.imwrite(str(tmp_path / "mask.png"), mask)
    photo = read_image(tmp_path / "photo.jpg")
    inside = photo[read_mask(tmp_path / "mask.png") > 128].mean()
    outside = photo[read_mask(tmp_path / "mask.png") <= 128].mean()
    assert inside > outside + 60  # the bright object lies under its mask
    assert check_pairs([Pair("photo", tmp_path / "photo.jpg", tmp_path / "mask.png")]) == []


def test_predict_writes_masks_in_the_displayed_orientation(trained, tmp_path, run_cli):
    stored = np.random.default_rng(1).integers(0, 256, (40, 70, 3), dtype=np.uint8)
    image = Image.fromarray(stored)
    exif = image.getexif()
    exif[0x0112] = 8
    image.save(tmp_path / "tall.jpg", exif=exif)
    proc = run_cli("predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                   "--out", "out", "--workers", "0", "tall.jpg", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert read_mask(tmp_path / "out" / "tall.png").shape == (70, 40)


@pytest.mark.parametrize(("content", "needle"), [
    (b"", "empty"), (b"hello, not an image", "not an image"),
    (b"\x89PNG\r\n\x1a\n0000", "truncated")])
def test_undecodable_files_say_why(tmp_path, content, needle):
    path = tmp_path / "x.png"
    path.write_bytes(content)
    with pytest.raises(DataError, match=needle):
        read_image(path)


def test_a_png_named_jpg_is_fine(tmp_path):
    rgb, _ = draw_pair(np.random.default_rng(0), 20, 20)
    Image.fromarray(rgb).save(tmp_path / "really_a_png.jpg", format="PNG")
    assert np.array_equal(read_image(tmp_path / "really_a_png.jpg"), rgb)


def test_worker_tracebacks_become_the_original_message():
    wrapped = ("Caught DataError in DataLoader worker process 0.\nOriginal Traceback (most recent "
               "call last):\n  File \"x.py\", line 1, in f\n    raise DataError(m)\n"
               "sodkit.errors.DataError: cannot decode image file a.jpg: truncated")
    assert str(DataError(wrapped)) == "cannot decode image file a.jpg: truncated"
    assert str(UserError("plain message")) == "plain message"


@pytest.mark.parametrize(("override", "needle"), [
    ("train.grad_clip=-1", "flip the gradients"), ("optim.lr=0", "trains nothing"),
    ("train.steps_per_epoch=0", "train.steps_per_epoch"), ("data.max_bad_samples=-1", ">= 0")])
def test_senseless_settings_fail_before_anything_runs(tmp_path, override, needle, run_cli):
    proc = run_cli("train", DEMO, override, cwd=tmp_path)
    assert proc.returncode == 2 and needle in proc.stderr
