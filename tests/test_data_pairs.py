"""Dataset resolution, pairing by stem, error messages and check_pairs, on real files."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.config.schema import DatasetCfg
from sodkit.data import check_pairs, find_pairs, resolve_dataset
from sodkit.errors import ConfigError, DataError


def write(path: Path, array: np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)
    return path


def image(h: int = 12, w: int = 16) -> np.ndarray:
    return np.full((h, w, 3), 100, np.uint8)


def mask(h: int = 12, w: int = 16) -> np.ndarray:
    out = np.zeros((h, w), np.uint8)
    out[2:6, 3:9] = 255
    return out


def dataset(root: Path, **kw: object) -> DatasetCfg:
    return resolve_dataset(DatasetCfg(root=str(root), image_dir="img", mask_dir="gt", **kw), "")


def test_pairs_by_stem_across_mixed_extensions(tmp_path: Path) -> None:
    write(tmp_path / "img" / "a.jpg", image())
    write(tmp_path / "img" / "b.png", image())
    write(tmp_path / "img" / "c.bmp", image())
    write(tmp_path / "gt" / "a.png", mask())
    write(tmp_path / "gt" / "b.bmp", mask())
    write(tmp_path / "gt" / "c.tif", mask())
    (tmp_path / "img" / "notes.txt").write_text("not an image")
    pairs = find_pairs(dataset(tmp_path))
    assert [p.stem for p in pairs] == ["a", "b", "c"]
    assert [p.image.name for p in pairs] == ["a.jpg", "b.png", "c.bmp"]
    assert [p.mask.name for p in pairs] == ["a.png", "b.bmp", "c.tif"]


def test_unmatched_files_are_reported_with_counts_and_names(tmp_path: Path, caplog) -> None:
    for stem in ("a", "b", "lonely1", "lonely2", "lonely3"):
        write(tmp_path / "img" / f"{stem}.jpg", image())
    for stem in ("a", "b", "orphan"):
        write(tmp_path / "gt" / f"{stem}.png", mask())
    with caplog.at_level(logging.WARNING, logger="sodkit.data"):
        pairs = find_pairs(dataset(tmp_path))
    assert [p.stem for p in pairs] == ["a", "b"]
    text = caplog.text
    assert "3 images without a mask" in text and "lonely1, lonely2, lonely3" in text
    assert "1 mask without an image" in text and "orphan" in text


def test_missing_folders_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=str(tmp_path / "nowhere")):
        find_pairs(dataset(tmp_path / "nowhere"))
    (tmp_path / "img").mkdir()
    with pytest.raises(DataError) as err:
        find_pairs(dataset(tmp_path))
    assert str(tmp_path / "gt") in str(err.value) and "mask_dir" in str(err.value)


def test_no_pairs_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "img" / "a.jpg", image())
    write(tmp_path / "gt" / "b.png", mask())
    with pytest.raises(DataError, match="no image/mask pairs"):
        find_pairs(dataset(tmp_path))


def test_list_file_restricts_stems(tmp_path: Path) -> None:
    for stem in ("a", "b", "c"):
        write(tmp_path / "img" / f"{stem}.jpg", image())
        write(tmp_path / "gt" / f"{stem}.png", mask())
    (tmp_path / "val.txt").write_text("# held out\nc.jpg\n\na\n")
    pairs = find_pairs(dataset(tmp_path, list_file="val.txt"))
    assert [p.stem for p in pairs] == ["a", "c"]
    (tmp_path / "bad.txt").write_text("a\nzzz\n")
    with pytest.raises(DataError, match="zzz"):
        find_pairs(dataset(tmp_path, list_file="bad.txt"))


def test_preset_resolves_with_defaults() -> None:
    # a preset given another root takes the root's name (#28), the preset's at its own name
    cfg = resolve_dataset(DatasetCfg(preset="ecssd", root="/x"), "/data")
    assert (cfg.name, cfg.root, cfg.image_dir, cfg.mask_dir) == ("x", "/x", "Image", "Mask")
    cfg = resolve_dataset(DatasetCfg(preset="ecssd", root="/elsewhere/ecssd"), "/data")
    assert (cfg.name, cfg.root, cfg.image_dir, cfg.mask_dir) == \
        ("ECSSD", "/elsewhere/ecssd", "Image", "Mask")
    cfg = resolve_dataset(DatasetCfg(preset="duts-tr"), "/data")
    assert cfg.root == "/data/DUTS-TR" and cfg.image_dir == "DUTS-TR-Image"
    cfg = resolve_dataset(DatasetCfg(preset="duts-te", name="mine", mask_dir="M"), "/data")
    assert (cfg.name, cfg.image_dir, cfg.mask_dir) == ("mine", "DUTS-TE-Image", "M")


def test_preset_finds_an_alternative_layout_on_disk(tmp_path: Path) -> None:
    (tmp_path / "ECSSD" / "images").mkdir(parents=True)
    (tmp_path / "ECSSD" / "ground_truth_mask").mkdir()
    cfg = resolve_dataset(DatasetCfg(preset="ecssd"), str(tmp_path))
    assert (cfg.image_dir, cfg.mask_dir) == ("images", "ground_truth_mask")


def test_relative_root_and_default_name(tmp_path: Path) -> None:
    cfg = resolve_dataset(DatasetCfg(root="sets/MySet", image_dir="i", mask_dir="m"),
                          str(tmp_path))
    assert cfg.root == str(tmp_path / "sets" / "MySet") and cfg.name == "MySet"


def test_unknown_preset_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match="did you mean 'ecssd'") as err:
        resolve_dataset(DatasetCfg(preset="ecsd"), "", where="data.test.1")
    assert "data.test.1.preset" in str(err.value)


def test_dataset_without_preset_or_dirs_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="image_dir"):
        resolve_dataset(DatasetCfg(root="/x", mask_dir="m"), "")


def test_check_pairs_reports_unreadable_and_size_mismatch(tmp_path: Path) -> None:
    write(tmp_path / "img" / "good.jpg", image())
    write(tmp_path / "gt" / "good.png", mask())
    write(tmp_path / "img" / "big.jpg", image(20, 20))
    write(tmp_path / "gt" / "big.png", mask())
    write(tmp_path / "img" / "broken.jpg", image())
    (tmp_path / "gt" / "broken.png").write_bytes(b"not a png")
    issues = check_pairs(find_pairs(dataset(tmp_path)))
    assert sorted(i.stem for i in issues) == ["big", "broken"]
    by_stem = {i.stem: i for i in issues}
    assert "20x20" in by_stem["big"].problem and "12x16" in by_stem["big"].problem
    assert by_stem["broken"].path == tmp_path / "gt" / "broken.png"


@pytest.mark.parametrize(("preset", "layout", "name"), [
    ("camo", ("Imgs", "GT"), "CAMO"),
    ("camo", ("Images/Test", "GT"), "CAMO"),
    ("cod10k", ("Imgs", "GT"), "COD10K"),
    ("cod10k", ("Test/Image", "Test/GT_Object"), "COD10K"),
    ("nc4k", ("Imgs", "GT"), "NC4K"),
    ("chameleon", ("Imgs", "GT"), "CHAMELEON"),
])
def test_camouflaged_object_presets_find_their_layouts(tmp_path: Path, preset, layout,
                                                       name) -> None:
    for folder in layout:
        (tmp_path / name / folder).mkdir(parents=True, exist_ok=True)
    cfg = resolve_dataset(DatasetCfg(preset=preset), str(tmp_path))
    assert (cfg.name, cfg.root, cfg.image_dir, cfg.mask_dir) == (
        name, str(tmp_path / name), *layout)


def test_the_cod_recipe_loads() -> None:
    from sodkit.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[1] / "configs" / "cod_fpn_r50.yaml", [])
    assert [d.preset for d in cfg.data.test] == ["camo", "cod10k", "nc4k", "chameleon"]
