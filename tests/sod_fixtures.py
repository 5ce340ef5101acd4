"""Small SOD datasets written to disk for end-to-end tests (DUTS layout, varied image sizes)."""

from __future__ import annotations

import socket
from pathlib import Path

import cv2
import numpy as np


def draw_pair(rng: np.random.Generator, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """A noisy background with one bright ellipse; the mask marks the ellipse."""
    image = rng.integers(0, 90, size=(height, width, 3), dtype=np.uint8)
    mask = np.zeros((height, width), np.uint8)
    center = (int(rng.integers(width // 4, 3 * width // 4)),
              int(rng.integers(height // 4, 3 * height // 4)))
    axes = (int(rng.integers(width // 8, width // 4)), int(rng.integers(height // 8, height // 4)))
    cv2.ellipse(mask, center, axes, float(rng.integers(0, 180)), 0, 360, 255, -1)
    color = rng.integers(150, 256, size=3)
    image[mask > 0] = color
    return image, mask


def write_duts_layout(root: Path, n_train: int = 16, n_test: int = 6, seed: int = 0) -> Path:
    """``root/DUTS-TR/DUTS-TR-{Image,Mask}`` and ``root/DUTS-TE/DUTS-TE-{Image,Mask}``."""
    rng = np.random.default_rng(seed)
    for split, count in (("TR", n_train), ("TE", n_test)):
        images = root / f"DUTS-{split}" / f"DUTS-{split}-Image"
        masks = root / f"DUTS-{split}" / f"DUTS-{split}-Mask"
        images.mkdir(parents=True, exist_ok=True)
        masks.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            height, width = int(rng.integers(48, 97)), int(rng.integers(48, 97))
            image, mask = draw_pair(rng, height, width)
            stem = f"sun_{split.lower()}_{i:03d}"
            cv2.imwrite(str(images / f"{stem}.jpg"), image)
            cv2.imwrite(str(masks / f"{stem}.png"), mask)
    return root


# The tiny runs' backbone: timm's test_resnet (0.38M parameters, a ResNet's stem, stages and
# BatchNorm) rather than resnet18 (11.2M), whose initialisation, steps and 135 MB checkpoints
# were most of each run's CPU time and prove nothing more about the engine.
TINY_BACKBONE = "test_resnet"


def tiny_overrides(data_root: Path, out: Path, name: str, epochs: int = 2) -> list[str]:
    """A run of a few seconds on :func:`write_duts_layout` data (16 train, 6 test pairs)."""
    return [
        f"data_root={data_root}", f"output_root={out}", f"name={name}",
        "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
        "data.size=64", "data.batch_size=4", "data.test_batch_size=4", "data.num_workers=0",
        f"model.backbone={TINY_BACKBONE}", "model.decoder_channels=16", f"train.epochs={epochs}",
        "train.log_every=2", "train.image_every=2", "eval.every=1", "eval.num_samples=3",
    ]


def free_port(low: int | None = None, high: int | None = None) -> int:
    """A port free on 127.0.0.1 now (any, or the first free one in [low, high))."""
    for port in range(low, high) if low else [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def write_photos(folder: Path, count: int = 2) -> Path:
    """``count`` random 48x40 colour PNGs ``im0.png``, ... in a new ``folder``."""
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        cv2.imwrite(str(folder / f"im{i}.png"), rng.integers(0, 255, (40, 48, 3), np.uint8))
    return folder


def write_tiny_checkpoint(path: Path) -> Path:
    """A checkpoint of an untrained FPN on timm's ``test_resnet`` (32 px, 8 decoder channels):
    the cheapest file every command loads."""
    import torch

    from sodkit.config import Config, DataCfg, ModelCfg, to_dict
    from sodkit.network import build_network

    torch.manual_seed(0)
    cfg = Config(data=DataCfg(size=32), model=ModelCfg(backbone="test_resnet",
                                                       decoder_channels=8))
    torch.save({"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)}, path)
    return path
