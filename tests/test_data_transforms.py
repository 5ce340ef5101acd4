"""Joint transforms keep image and mask aligned; the mask stays soft; test transform shapes."""

from __future__ import annotations

import numpy as np
import torch

from sodkit.config.schema import DataCfg
from sodkit.data import build_train_transform
from sodkit.inference.pipelines import build_test_transform

MEAN = torch.tensor(DataCfg().mean).view(3, 1, 1)
STD = torch.tensor(DataCfg().std).view(3, 1, 1)


def l_shape(h: int = 60, w: int = 90) -> tuple[np.ndarray, np.ndarray]:
    """An asymmetric white L on black, so a flip or rotation of only one of the two shows."""
    mask = np.zeros((h, w), np.uint8)
    mask[10:50, 15:30] = 255
    mask[38:50, 15:65] = 255
    image = np.zeros((h, w, 3), np.uint8)
    image[mask > 0] = (230, 200, 210)
    return image, mask


def test_random_train_transform_keeps_image_and_mask_aligned() -> None:
    cfg = DataCfg(hflip=0.5, rotation=40.0, color_jitter=0.2)
    transform = build_train_transform(cfg)
    image, mask = l_shape()
    reference = None
    changed = 0
    for seed in range(24):
        torch.manual_seed(seed)
        img, msk = transform(image, mask, 48)
        assert img.shape == (3, 48, 48) and img.dtype == torch.float32
        assert msk.shape == (1, 48, 48) and msk.dtype == torch.float32
        assert 0.0 <= float(msk.min()) and float(msk.max()) <= 1.0
        bright = (img * STD + MEAN).mean(0) > 0.4
        inside, outside = msk[0] > 0.9, msk[0] < 0.1
        assert bright[inside].float().mean() > 0.97
        assert (~bright[outside]).float().mean() > 0.97
        if reference is None:
            reference = inside
        changed += int((inside ^ reference).sum() > 20)
    assert changed >= 5  # flips and rotations really happened


def test_train_mask_is_soft_and_resized_bilinearly() -> None:
    cfg = DataCfg(hflip=0.0, rotation=0.0, color_jitter=0.0)
    image, mask = l_shape()
    _, msk = build_train_transform(cfg)(image, mask, 37)
    values = torch.unique(msk)
    assert values.numel() > 2  # edges are fractional, not nearest-neighbour 0/1
    assert float(values.min()) == 0.0 and float(values.max()) == 1.0


def test_no_augmentation_is_deterministic() -> None:
    cfg = DataCfg(hflip=0.0, rotation=0.0, color_jitter=0.0)
    image, mask = l_shape()
    a = build_train_transform(cfg)(image, mask, 32)
    b = build_train_transform(cfg)(image, mask, 32)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_test_transform_resizes_and_normalises() -> None:
    cfg = DataCfg(size=40)
    image = np.full((30, 70, 3), 255, np.uint8)
    out = build_test_transform(cfg)(image)
    assert out.shape == (3, 40, 40) and out.dtype == torch.float32
    expected = (1.0 - MEAN) / STD
    assert torch.allclose(out, expected.expand(3, 40, 40), atol=1e-5)
    assert build_test_transform(cfg, size=24)(image).shape == (3, 24, 24)
