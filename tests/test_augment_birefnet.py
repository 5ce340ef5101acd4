"""BiRefNet's training augmentations (issue 24, item 2; its image_proc.py ``preproc``) as
``data`` keys: flip and rotation keep image and mask aligned, the rotation happens with its
probability, colour enhance is PIL's ``ImageEnhance`` chain with the original's factor draws,
pepper sets pixels to black or white, and neither touches the mask; ``data.size_list`` takes
non-square [height, width] sizes (the original's ``dynamic_size``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance

from sodkit.config import ConfigError, load_config
from sodkit.config.schema import IMAGENET_MEAN, IMAGENET_STD, DataCfg
from sodkit.data import build_train_loader, set_epoch
from sodkit.data.augment import color_enhance, pepper
from sodkit.data.transforms import TrainTransform, image_to_tensor
from tests.test_data_loaders import config, write_set

OFF = {"hflip": 0.0, "rotation": 0.0, "color_jitter": 0.0}


def _pair(height: int = 48, width: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """An asymmetric mask (an L shape) and an image that is the same mask in grey."""
    mask = np.zeros((height, width), np.uint8)
    mask[8:40, 6:18] = 255
    mask[30:40, 6:50] = 255
    return np.repeat(mask[..., None], 3, axis=2), mask


def _grey(image: torch.Tensor) -> torch.Tensor:
    """The normalised image's first channel back in [0, 1]."""
    return image[0] * IMAGENET_STD[0] + IMAGENET_MEAN[0]


@pytest.mark.parametrize("keys", [{"hflip": 1.0}, {"rotation": 15.0, "rotation_p": 1.0}],
                         ids=["flip", "rotate"])
def test_geometry_moves_image_and_mask_together(keys: dict) -> None:
    image, mask = _pair()
    transform = TrainTransform(DataCfg(**{**OFF, **keys}))
    plain = TrainTransform(DataCfg(**OFF))(image, mask, (48, 64))[1]
    for seed in range(5):
        torch.manual_seed(seed)
        img, msk = transform(image, mask, (48, 64))
        assert img.shape == (3, 48, 64) and msk.shape == (1, 48, 64)
        torch.testing.assert_close(_grey(img), msk[0], atol=0.02, rtol=0)  # still aligned
        assert not torch.equal(msk, plain)  # and it did move


def test_rotation_happens_with_its_probability() -> None:
    """image_proc.py random_rotate: ``random.random() > 0.8``: one sample in five."""
    image, mask = _pair()
    transform = TrainTransform(DataCfg(**{**OFF, "rotation": 15.0, "rotation_p": 0.2}))
    plain = TrainTransform(DataCfg(**OFF))(image, mask, 32)[1]
    rotated = 0
    for seed in range(200):
        torch.manual_seed(seed)
        rotated += not torch.equal(transform(image, mask, 32)[1], plain)
    assert 20 <= rotated <= 60  # binomial(200, 0.2): mean 40, sd 5.7


def test_color_enhance_is_pils_chain_with_the_originals_draws() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    image[8:16, 8:24] = [200, 40, 90]  # flat regions and edges for contrast and sharpness
    for seed in range(4):
        torch.manual_seed(seed)
        ours = color_enhance(image_to_tensor(image)).permute(1, 2, 0).numpy()
        torch.manual_seed(seed)  # the same draws, in the original's order and ranges
        factors = [int(torch.randint(lo, hi + 1, ()).item()) / 10
                   for lo, hi in ((5, 15), (5, 15), (0, 20), (0, 30))]
        assert 0.5 <= factors[0] <= 1.5 and 0.5 <= factors[1] <= 1.5
        assert 0 <= factors[2] <= 2 and 0 <= factors[3] <= 3
        theirs = Image.fromarray(image)
        for enhancer, factor in zip((ImageEnhance.Brightness, ImageEnhance.Contrast,
                                     ImageEnhance.Color, ImageEnhance.Sharpness), factors,
                                    strict=True):
            theirs = enhancer(theirs).enhance(factor)
        diff = np.abs(ours.astype(int) - np.asarray(theirs).astype(int))
        # PIL's contrast blends with the integer-rounded grey mean; uint8 rounding in 4 steps
        assert diff.max() <= 4 and diff.mean() < 1.0, (seed, factors)


def test_pepper_sets_pixels_black_or_white_and_leaves_the_mask() -> None:
    grey = np.full((40, 50, 3), 128, np.uint8)
    torch.manual_seed(0)
    out = pepper(image_to_tensor(grey), 0.0015 * 10).numpy()
    changed = (out != 128).any(axis=0)
    assert 1 <= changed.sum() <= int(0.015 * 40 * 50)  # drawn with repetition
    values = out[:, changed]
    assert set(np.unique(values)) <= {0, 255}
    assert (values == values[:1]).all()  # the same value on every channel
    image, mask = _pair()
    cfg = DataCfg(**OFF, pepper=0.05, color_enhance=True)
    torch.manual_seed(1)
    img, msk = TrainTransform(cfg)(image, mask, (48, 64))
    plain_img, plain = TrainTransform(DataCfg(**OFF))(image, mask, (48, 64))
    assert torch.equal(msk, plain) and not torch.equal(img, plain_img)


def test_size_list_takes_non_square_sizes(tmp_path: Path) -> None:
    cfg = config([write_set(tmp_path / "a", 8)], [], size_list=[[32, 64], [64, 32], 48],
                 batch_size=2)
    loader = build_train_loader(cfg)
    seen = set()
    for epoch in range(4):
        set_epoch(loader, epoch)
        for batch in loader:
            h, w = batch["image"].shape[-2:]
            assert (h, w) in {(32, 64), (64, 32), (48, 48)}
            assert batch["mask"].shape == (2, 1, h, w)
            seen.add((h, w))
    assert {(32, 64), (64, 32)} <= seen


def test_size_list_pairs_are_checked() -> None:
    assert load_config(None, ["data.size_list=[[768, 1024], 512]"]).data.size_list == [
        [768, 1024], 512]
    for value, key in (("[[768, 1024, 512]]", "data.size_list.0"),
                       ("[[8, 1024]]", "data.size_list.0.0")):
        with pytest.raises(ConfigError, match=rf"^{key}: "):
            load_config(None, [f"data.size_list={value}"])


def test_size_range_draws_as_dynamic_size(tmp_path: Path) -> None:
    """BiRefNet's dynamic_size ((256, 2304), (256, 2304)) draws each side per batch as
    ``randint(low, high) // 32 * 32``: multiples of 32 over the whole range, both sides apart,
    the same on every rank."""
    from sodkit.data import MultiScaleBatchSampler
    from sodkit.data.sizes import SizeRange

    ranks = [MultiScaleBatchSampler(4000, 1, SizeRange((256, 2304), (64, 100)), seed=3,
                                    rank=r, world_size=2) for r in range(2)]
    sizes = ranks[0].batch_sizes()
    assert sizes == ranks[1].batch_sizes() and len(sizes) == 2000
    heights, widths = {h for h, _ in sizes}, {w for _, w in sizes}
    assert heights == set(range(256, 2273, 32)) | ({2304} & heights)  # 2304: 1 in 2049
    assert widths == {64, 96}
    cfg = config([write_set(tmp_path / "a", 6)], [], size_range=[[32, 80], [64, 64]],
                 batch_size=2)
    loader = build_train_loader(cfg)
    shapes = {tuple(batch["image"].shape[-2:]) for batch in loader}
    assert shapes <= {(32, 64), (64, 64)}
    for value, key in (("[[16, 64], [64, 64]]", "data.size_range.0"),
                       ("[[64, 32], [64, 64]]", "data.size_range.0"),
                       ("[[64, 128]]", "data.size_range")):
        with pytest.raises(ConfigError, match=rf"^{key}: "):
            load_config(None, [f"data.size_range={value}"])
    with pytest.raises(ConfigError, match="not both"):
        load_config(None, ["data.size_range=[[64, 96], [64, 96]]", "data.size_list=[64]"])
