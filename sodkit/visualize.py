"""Image | GT | prediction grids for TensorBoard and ``samples.png``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np
import torch


def denormalize(image: torch.Tensor, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """A normalised (3, H, W) tensor back to a uint8 RGB (H, W, 3) array for display."""
    image = image.detach().float().cpu()
    mean_t = torch.tensor(mean).view(3, 1, 1)
    std_t = torch.tensor(std).view(3, 1, 1)
    rgb = (image * std_t + mean_t).clamp(0, 1).mul(255).round().byte()
    return rgb.permute(1, 2, 0).numpy()


def to_rgb(mask: np.ndarray | torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """A grey mask (uint8 0..255 or float 0..1) as an RGB tile of ``size`` (H, W)."""
    if isinstance(mask, torch.Tensor):
        mask = mask.detach().float().cpu().squeeze().numpy()
    if mask.dtype != np.uint8:
        mask = np.clip(np.rint(mask * 255.0), 0, 255).astype(np.uint8)
    if mask.shape != size:
        mask = cv2.resize(mask, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)
    return np.repeat(mask[:, :, None], 3, axis=2)


def make_grid(rows: Sequence[Sequence[np.ndarray]], gap: int = 2) -> np.ndarray:
    """Stack rows of equal-size uint8 RGB tiles into one image, with white gaps between tiles."""
    if not rows:
        raise ValueError("make_grid needs at least one row")
    tile_h, tile_w = rows[0][0].shape[:2]
    ncols = max(len(r) for r in rows)
    height = len(rows) * tile_h + (len(rows) - 1) * gap
    width = ncols * tile_w + (ncols - 1) * gap
    grid = np.full((height, width, 3), 255, dtype=np.uint8)
    for i, row in enumerate(rows):
        for j, tile in enumerate(row):
            y, x = i * (tile_h + gap), j * (tile_w + gap)
            grid[y : y + tile_h, x : x + tile_w] = tile
    return grid


def encode_rgb(image: np.ndarray) -> bytes:
    """A uint8 RGB image as PNG bytes, through OpenCV's BGR encoder."""
    ok, buf = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    if not ok:
        raise OSError("cannot encode an RGB image as PNG")
    return buf.tobytes()


def write_rgb(path, image: np.ndarray) -> None:
    """Write a uint8 RGB image (PNG)."""
    Path(path).write_bytes(encode_rgb(image))
