"""Train/test loaders: multi-scale batches, rank sharding, batch formats, image modes."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from sodkit.config.schema import Config, DataCfg, DatasetCfg
from sodkit.data import (
    InferenceSampler,
    MultiScaleBatchSampler,
    build_test_loaders,
    build_train_loader,
    set_epoch,
)


def write_set(root: Path, count: int, seed: int = 0) -> DatasetCfg:
    """``count`` pairs of varied sizes under ``root/{img,gt}``."""
    rng = np.random.default_rng(seed)
    (root / "img").mkdir(parents=True)
    (root / "gt").mkdir()
    for i in range(count):
        h, w = int(rng.integers(20, 41)), int(rng.integers(20, 41))
        image = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
        mask = np.zeros((h, w), np.uint8)
        mask[h // 4: h // 2, w // 4: w // 2] = 255
        cv2.imwrite(str(root / "img" / f"s{i:02d}.jpg"), image)
        cv2.imwrite(str(root / "gt" / f"s{i:02d}.png"), mask)
    return DatasetCfg(root=str(root), image_dir="img", mask_dir="gt")


def config(train: list[DatasetCfg], test: list[DatasetCfg], **data: object) -> Config:
    cfg = Config()
    cfg.data = DataCfg(train=train, test=test, num_workers=0, **data)
    return cfg


def test_multiscale_batches_share_one_size_from_the_list(tmp_path: Path) -> None:
    cfg = config([write_set(tmp_path / "a", 7), write_set(tmp_path / "b", 6, seed=1)], [],
                 size_list=[24, 32, 40], batch_size=3)
    loader = build_train_loader(cfg)
    seen = set()
    for epoch in range(3):
        set_epoch(loader, epoch)
        batches = list(loader)
        assert len(batches) == 13 // 3
        for batch in batches:
            s = batch["image"].shape[-1]
            assert s in (24, 32, 40)
            assert batch["image"].shape == (3, 3, s, s) and batch["image"].dtype == torch.float32
            assert batch["mask"].shape == (3, 1, s, s) and batch["mask"].dtype == torch.float32
            assert 0.0 <= float(batch["mask"].min()) and float(batch["mask"].max()) <= 1.0
            assert batch["index"].dtype == torch.int64 and batch["index"].shape == (3,)
            seen.add(s)
    assert len(seen) > 1


def test_size_sequence_is_identical_across_ranks_and_shards_are_disjoint() -> None:
    for epoch in range(4):
        samplers = [MultiScaleBatchSampler(50, 4, [16, 24, 32], seed=7, rank=r, world_size=3)
                    for r in range(3)]
        for s in samplers:
            s.set_epoch(epoch)
        runs = [list(s) for s in samplers]
        assert all(len(run) == 50 // 12 for run in runs)
        sizes = [[batch[0][1] for batch in run] for run in runs]
        assert sizes[0] == sizes[1] == sizes[2]
        assert all(len({key[1] for key in batch}) == 1 for run in runs for batch in run)
        indices = [key[0] for run in runs for batch in run for key in batch]
        assert len(indices) == len(set(indices)) == 48
    assert samplers[0].batch_sizes() != [16] * len(samplers[0])  # sizes vary


def test_train_loader_is_reproducible_and_worker_independent(tmp_path: Path) -> None:
    cfg = config([write_set(tmp_path / "a", 8)], [], batch_size=4, rotation=20.0)
    runs = []
    for workers in (0, 1, 0):
        cfg.data.num_workers = workers
        loader = build_train_loader(cfg)
        set_epoch(loader, 2)
        runs.append([b["image"] for b in loader])
    for a, b in zip(runs[0], runs[1], strict=True):
        assert torch.equal(a, b)
    assert all(torch.equal(a, b) for a, b in zip(runs[0], runs[2], strict=True))
    set_epoch(loader, 3)
    assert not torch.equal(next(iter(loader))["image"], runs[0][0])


@pytest.mark.parametrize("length", [1, 7, 10])
def test_inference_sampler_covers_every_index_once(length: int) -> None:
    for world in (1, 2, 3):
        shards = [list(InferenceSampler(length, r, world)) for r in range(world)]
        assert [i for shard in shards for i in shard] == list(range(length))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
        for shard in shards:
            assert shard == list(range(shard[0], shard[0] + len(shard))) if shard else True


def test_test_loaders_shard_exactly_and_keep_gt_at_original_size(tmp_path: Path) -> None:
    sets = [write_set(tmp_path / "x", 7), write_set(tmp_path / "y", 5, seed=3)]
    cfg = config([], sets, size=32, test_batch_size=2)
    for world in (1, 2, 3):
        names: dict[str, list[str]] = {"x": [], "y": []}
        for rank in range(world):
            for name, loader in build_test_loaders(cfg, rank, world).items():
                assert loader.dataset.name == name and len(loader.dataset) == len(
                    loader.dataset.pairs)
                for batch in loader:
                    names[name].extend(batch["name"])
                    check_test_batch(batch, loader.dataset)
        assert names["x"] == [f"s{i:02d}" for i in range(7)]
        assert names["y"] == [f"s{i:02d}" for i in range(5)]


def check_test_batch(batch: dict, dataset) -> None:
    n = len(batch["name"])
    assert batch["image"].shape == (n, 3, 32, 32) and batch["image"].dtype == torch.float32
    assert batch["index"].dtype == torch.int64
    for i, gt, size, name in zip(batch["index"].tolist(), batch["gt"], batch["image_size"],
                                 batch["name"], strict=True):
        pair = dataset.pairs[i]
        assert pair.stem == name
        original = cv2.imread(str(pair.mask), cv2.IMREAD_GRAYSCALE)
        assert gt.dtype == np.uint8 and np.array_equal(gt, original)
        assert tuple(size) == original.shape


def test_image_modes_read_as_three_channels(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "gt").mkdir()
    h, w = 18, 22
    rgb = np.random.default_rng(0).integers(0, 255, (h, w, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "img" / "rgb.png")
    Image.fromarray(rgb[..., 0]).save(tmp_path / "img" / "grey.png")
    Image.fromarray(np.dstack([rgb, np.full((h, w), 128, np.uint8)])).save(
        tmp_path / "img" / "rgba.png")
    Image.fromarray(rgb).convert("P").save(tmp_path / "img" / "palette.png")
    bgr16 = cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR).astype(np.uint16) * 257
    cv2.imwrite(str(tmp_path / "img" / "deep.png"), bgr16)
    for stem in ("rgb", "grey", "rgba", "palette", "deep"):
        cv2.imwrite(str(tmp_path / "gt" / f"{stem}.png"), np.zeros((h, w), np.uint8))
    ds = DatasetCfg(root=str(tmp_path), image_dir="img", mask_dir="gt")
    cfg = config([ds], [ds], size=16, batch_size=5, test_batch_size=5, hflip=0.0,
                 rotation=0.0, color_jitter=0.0)
    test_batch = next(iter(build_test_loaders(cfg)[tmp_path.name]))
    train_batch = next(iter(build_train_loader(cfg)))
    assert test_batch["image"].shape == (5, 3, 16, 16)
    assert train_batch["image"].shape == (5, 3, 16, 16)
    by_name = dict(zip(test_batch["name"], test_batch["image"], strict=True))
    assert torch.allclose(by_name["deep"], by_name["rgb"], atol=1e-5)  # 16-bit scaled to 8
    grey = by_name["grey"]
    assert torch.allclose(grey[0] * 0.229 + 0.485, grey[1] * 0.224 + 0.456, atol=1e-5)
