"""High-resolution datasets: the DIS5K / HRSOD / UHRSD / DAVIS-S presets find their release
layouts; JPEGs much larger than the training size are decoded at reduced scale (libjpeg's 1/2,
1/4, 1/8), close to a full decode once resized; the full data check decodes them at 1/8.

The reduced path is proven by the decoded shapes, not by time (``benchmarks/highres_decode.py``
measures the time: benchmarks/RESULTS.md).
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

from sodkit.config.schema import DataCfg, DatasetCfg
from sodkit.data import check_pairs, find_pairs, resolve_dataset
from sodkit.data.datasets import TrainDataset, _read_pair
from sodkit.data.pairs import Pair
from sodkit.data.transforms import build_train_transform
from sodkit.errors import DataError
from sodkit.imageio import decoded_size, read_image, read_image_reduced, reduction


@pytest.mark.parametrize(("preset", "root", "layout", "name"), [
    ("dis-tr", "DIS5K/DIS-TR", ("im", "gt"), "DIS-TR"),
    ("dis-vd", "DIS5K/DIS-VD", ("im", "gt"), "DIS-VD"),
    *[(f"dis-te{i}", f"DIS5K/DIS-TE{i}", ("im", "gt"), f"DIS-TE{i}") for i in range(1, 5)],
    ("hrsod-tr", "HRSOD", ("HRSOD_train", "HRSOD_train_mask"), "HRSOD-TR"),
    ("hrsod-tr", "HRSOD", ("TR-HRSOD/im", "TR-HRSOD/gt"), "HRSOD-TR"),
    ("hrsod-te", "HRSOD", ("HRSOD_test", "HRSOD_test_mask"), "HRSOD-TE"),
    ("hrsod-te", "HRSOD", ("TE-HRSOD/im", "TE-HRSOD/gt"), "HRSOD-TE"),
    ("uhrsd-tr", "UHRSD", ("UHRSD_TR_2K/image", "UHRSD_TR_2K/mask"), "UHRSD-TR"),
    ("uhrsd-tr", "UHRSD", ("TR-UHRSD/im", "TR-UHRSD/gt"), "UHRSD-TR"),
    ("uhrsd-te", "UHRSD", ("UHRSD_TE_2K/image", "UHRSD_TE_2K/mask"), "UHRSD-TE"),
    ("davis-s", "DAVIS-S", ("im", "gt"), "DAVIS-S"),
    ("davis-s", "DAVIS-S", ("images", "masks"), "DAVIS-S"),
])
def test_high_resolution_presets_find_their_release_layouts(tmp_path, preset, root, layout,
                                                            name):
    for folder in layout:
        (tmp_path / root / folder).mkdir(parents=True, exist_ok=True)
    cfg = resolve_dataset(DatasetCfg(preset=preset), str(tmp_path))
    assert (cfg.name, cfg.root, cfg.image_dir, cfg.mask_dir) == (
        name, str(tmp_path / root), *layout)


def test_birefnets_hrsod_task_folder_through_root(tmp_path):
    """BiRefNet's packaged HRSOD folder holds UHRSD beside HRSOD (the presets' docstring)."""
    for folder in ("TR-UHRSD/im", "TR-UHRSD/gt"):
        (tmp_path / "HRSOD" / folder).mkdir(parents=True)
    cfg = resolve_dataset(DatasetCfg(preset="uhrsd-tr", root="HRSOD", name="UHRSD-TR"),
                          str(tmp_path))
    assert (cfg.name, cfg.image_dir) == ("UHRSD-TR", "TR-UHRSD/im")


def _photo(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Smooth colours and grain: a photo's spectrum, not noise (RGB uint8)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 255, (6, 8, 3)).astype(np.float32)
    image = cv2.resize(base, (width, height), interpolation=cv2.INTER_CUBIC)
    image += rng.normal(0, 8, image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def big_jpeg(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.jpg"
    cv2.imwrite(str(path), _photo(1800, 2400)[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
    return path


def test_reduction_is_the_largest_that_keeps_the_target():
    assert reduction(1800, 2400, (400, 400)) == 4  # 450 x 600
    assert reduction(1800, 2400, (451, 400)) == 2  # 1/4 would give 450 rows
    assert reduction(1800, 2400, (225, 300)) == 8
    assert reduction(1801, 2400, (226, 300)) == 8  # libjpeg rounds up: 226 rows
    assert reduction(1800, 2400, (1024, 1024)) == 1


def test_a_reduced_decode_resized_is_close_to_a_full_decode_resized(big_jpeg):
    reduced, factor = read_image_reduced(big_jpeg, (400, 400))
    assert (factor, reduced.shape) == (4, (450, 600, 3))  # the reduced path was taken
    full = read_image(big_jpeg)
    a, b = (cv2.resize(x, (400, 400), interpolation=cv2.INTER_AREA).astype(np.int16)
            for x in (full, reduced))
    diff = np.abs(a - b)
    assert diff.mean() < 1.0 and diff.max() <= 8, (diff.mean(), diff.max())


def test_png_images_and_small_targets_decode_full(tmp_path, big_jpeg):
    assert read_image_reduced(big_jpeg, (1024, 1024))[0].shape == (1800, 2400, 3)
    png = tmp_path / "big.png"
    cv2.imwrite(str(png), _photo(900, 1200))
    image, factor = read_image_reduced(png, (100, 100))
    assert factor == 1 and image.shape == (900, 1200, 3)


def test_the_exif_orientation_is_applied_to_a_reduced_decode(tmp_path):
    path = tmp_path / "turned.jpg"
    exif = Image.Exif()
    exif[0x0112] = 6  # shown turned a quarter clockwise: 1200 x 800 stored, 800 x 1200 shown
    Image.fromarray(_photo(800, 1200)).save(path, quality=90, exif=exif)
    full = read_image(path)
    reduced, factor = read_image_reduced(path, (200, 100))  # (H, W) as shown
    assert full.shape == (1200, 800, 3) and (factor, reduced.shape) == (4, (300, 200, 3))
    small = cv2.resize(full, (200, 300), interpolation=cv2.INTER_AREA).astype(np.int16)
    assert np.abs(small - reduced).mean() < 2.0


def test_a_truncated_jpeg_is_refused_by_the_reduced_decode(tmp_path, big_jpeg):
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(big_jpeg.read_bytes()[: big_jpeg.stat().st_size // 2])
    with pytest.raises(DataError, match="truncated or corrupt"):
        read_image_reduced(cut, (100, 100))
    with pytest.raises(DataError, match="truncated or corrupt"):
        decoded_size(cut)


def _pair(tmp_path: Path, big_jpeg: Path) -> Pair:
    mask = np.zeros((1800, 2400), np.uint8)
    cv2.circle(mask, (1200, 900), 600, 255, -1)
    cv2.imwrite(str(tmp_path / "big.png"), mask)
    return Pair("big", big_jpeg, tmp_path / "big.png")


def test_training_decodes_at_reduced_size_and_averages_the_mask_down(tmp_path, big_jpeg):
    pair = _pair(tmp_path, big_jpeg)
    image, mask = _read_pair(pair, (400, 400))
    assert image.shape == (450, 600, 3) and mask.shape == (450, 600)
    assert set(np.unique(mask)) > {0, 255}  # a soft edge: averaged down, not sampled
    data = DataCfg(hflip=False, rotation=0, color_jitter=0)
    dataset = TrainDataset([pair], build_train_transform(data), default_size=256)
    item = dataset[(0, 256, 0)]
    full_image, full_mask = build_train_transform(data)(read_image(big_jpeg),
                                                        cv2.imread(str(pair.mask), 0), 256)
    assert item["image"].shape == (3, 256, 256)
    assert (item["image"] - full_image).abs().mean() < 0.02  # normalised units (~1/255 / std)
    assert (item["mask"] - full_mask).abs().max() < 0.05


def test_the_crop_fraction_asks_for_more_pixels(big_jpeg):
    data = DataCfg(crop=0.5)
    dataset = TrainDataset([], build_train_transform(data), default_size=256)
    assert dataset._at_least(256) == (512, 512) and dataset._at_least((224, 300)) == (448, 600)


def test_the_full_check_decodes_large_jpegs_at_an_eighth(tmp_path, big_jpeg):
    """Sizes are the full ones (a mismatch is still found), a truncated file still fails."""
    assert decoded_size(big_jpeg) == (1800, 2400)
    root = tmp_path / "set"
    (root / "im").mkdir(parents=True)
    (root / "gt").mkdir()
    (root / "im" / "big.jpg").write_bytes(big_jpeg.read_bytes())
    (root / "im" / "cut.jpg").write_bytes(big_jpeg.read_bytes()[:100_000])
    cv2.imwrite(str(root / "gt" / "big.png"), np.zeros((1800, 2401), np.uint8))
    cv2.imwrite(str(root / "gt" / "cut.png"), np.zeros((1800, 2400), np.uint8))
    cfg = resolve_dataset(DatasetCfg(root=str(root), image_dir="im", mask_dir="gt"), "")
    issues = {i.stem: i.problem for i in check_pairs(find_pairs(cfg), full=True)}
    assert "1800x2400" in issues["big"] and "1800x2401" in issues["big"]
    assert "truncated or corrupt" in issues["cut"]


def test_the_reduced_decode_keeps_the_pixel_limit(tmp_path, big_jpeg, monkeypatch):
    monkeypatch.setenv("SODKIT_MAX_PIXELS", str(1000 * 1000))
    with pytest.raises(DataError, match="SODKIT_MAX_PIXELS"):
        read_image_reduced(big_jpeg, (100, 100))


def test_dis5k_sized_images_are_within_the_default_limits(monkeypatch):
    """DIS5K's largest photos are 8K (about 8192 x 5464): under the default pixel bound, which
    still refuses a decompression bomb's declared 2**30 pixels before any decoder runs."""
    from sodkit.limits import check_pixels

    monkeypatch.delenv("SODKIT_MAX_PIXELS", raising=False)
    check_pixels("dis.jpg", 8192, 5464)
    with pytest.raises(DataError, match="SODKIT_MAX_PIXELS"):
        check_pixels("bomb.jpg", 1 << 15, 1 << 15)
