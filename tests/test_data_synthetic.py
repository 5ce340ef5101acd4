"""The synthetic demo: deterministic bytes, reuse, atomic publication, and the demo presets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sodkit.config.schema import DatasetCfg
from sodkit.data import (
    DEMO_VERSION,
    find_pairs,
    generate_demo,
    read_image,
    read_mask,
    resolve_dataset,
)
from sodkit.data.synthetic import MARKER
from sodkit.errors import DataError


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_same_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    generate_demo(tmp_path / "a", n_train=4, n_test=2, seed=3)
    generate_demo(tmp_path / "b", n_train=4, n_test=2, seed=3)
    generate_demo(tmp_path / "c", n_train=4, n_test=2, seed=4)
    a, b, c = files(tmp_path / "a"), files(tmp_path / "b"), files(tmp_path / "c")
    assert len(a) == 4 * 2 + 2 * 2 + 1
    assert a == b
    assert a.keys() == c.keys() and a != c
    assert json.loads(a[MARKER])["version"] == DEMO_VERSION
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left


def test_samples_look_like_sod_data(tmp_path: Path) -> None:
    generate_demo(tmp_path, n_train=6, n_test=1, seed=0)
    for path in sorted((tmp_path / "DEMO-TR" / "masks").iterdir()):
        mask = read_mask(path)
        image = read_image(tmp_path / "DEMO-TR" / "images" / f"{path.stem}.jpg")
        assert image.shape[:2] == mask.shape and 160 <= min(mask.shape) <= max(mask.shape) <= 320
        fg = mask > 128
        assert 0.01 < fg.mean() < 0.7  # an object, not the whole image
        assert np.isin(mask, [0, 255]).mean() > 0.95  # essentially binary, soft edges only


def test_second_call_reuses_the_data(tmp_path: Path) -> None:
    generate_demo(tmp_path / "d", n_train=2, n_test=1)
    first = tmp_path / "d" / "DEMO-TR" / "images" / "00000.jpg"
    mtime = first.stat().st_mtime_ns
    (tmp_path / "d" / "user-note.txt").write_text("kept")
    generate_demo(tmp_path / "d", n_train=2, n_test=1)
    assert first.stat().st_mtime_ns == mtime
    assert (tmp_path / "d" / "user-note.txt").exists()


def test_foreign_folder_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "something.txt").write_text("mine")
    with pytest.raises(DataError, match="not a complete sodkit demo"):
        generate_demo(tmp_path / "d", n_train=1, n_test=1)
    assert (tmp_path / "d" / "something.txt").read_text() == "mine"


def test_demo_presets_use_the_cache_folder(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SODKIT_CACHE", str(tmp_path))
    root = tmp_path / f"demo-v{DEMO_VERSION}"
    generate_demo(root, n_train=3, n_test=2)  # small, so the preset reuses it
    train = resolve_dataset(DatasetCfg(preset="demo-train"), "/ignored")
    test = resolve_dataset(DatasetCfg(preset="demo-test"), "/ignored")
    assert train.root == test.root == str(root)
    assert (train.name, test.name) == ("DEMO-TR", "DEMO-TE")
    assert len(find_pairs(train)) == 3 and len(find_pairs(test)) == 2


def test_demo_preset_generates_on_first_use(tmp_path: Path, monkeypatch) -> None:
    import sodkit.data.presets as presets
    from sodkit.data import synthetic

    calls = []

    def small(root: Path) -> None:
        calls.append(root)
        synthetic.generate_demo(root, n_train=2, n_test=1)

    # a real preset with a smaller prepare hook, so the test does not write 950 images
    preset = presets.get_preset("demo-test")
    monkeypatch.setitem(presets.PRESETS._items, "demo-test",
                        presets.Preset(preset.name, preset.root, preset.layouts, prepare=small))
    cfg = resolve_dataset(DatasetCfg(preset="demo-test", root=str(tmp_path / "here")), "")
    assert len(find_pairs(cfg)) == 1 and calls == [tmp_path / "here"]
