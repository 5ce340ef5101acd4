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


_FONT = cv2.FONT_HERSHEY_SIMPLEX
_SCALE, _LINE = 0.4, 14  # text size and line height in pixels
SAMPLE_COLUMNS = ("image", "GT", "prediction")


def _put(canvas: np.ndarray, text: str, x: int, y: int) -> None:
    cv2.putText(canvas, text, (x, y), _FONT, _SCALE, (0, 0, 0), 1, cv2.LINE_AA)


def labelled_grid(rows: Sequence[Sequence[np.ndarray]], titles: Sequence[str],
                  labels: Sequence[Sequence[str]], gap: int = 2) -> np.ndarray:
    """:func:`make_grid` with a title over each column and, right of each row, its lines of
    ``labels`` (a name and its scores), so that ``samples.png`` reads without the docs (#28)."""
    grid = make_grid(rows, gap)
    tile_h, tile_w = rows[0][0].shape[:2]
    header = _LINE + 8
    widest = max((cv2.getTextSize(t, _FONT, _SCALE, 1)[0][0] for row in labels for t in row),
                 default=0)
    side = widest + 12 if widest else 0
    canvas = np.full((grid.shape[0] + header, grid.shape[1] + side, 3), 255, np.uint8)
    canvas[header:, : grid.shape[1]] = grid
    for j, title in enumerate(titles):
        width = cv2.getTextSize(title, _FONT, _SCALE, 1)[0][0]
        _put(canvas, title, j * (tile_w + gap) + max((tile_w - width) // 2, 0), header - 7)
    for i, lines in enumerate(labels):
        top = header + i * (tile_h + gap)
        for k, line in enumerate(lines):
            _put(canvas, line, grid.shape[1] + 8, top + (k + 1) * _LINE)
    return canvas


def png_with_text(png: bytes, text: dict[str, str]) -> bytes:
    """``png`` with ``text`` as tEXt chunks after its header (Latin-1 keys and values), so that
    what an image shows in pixels can also be read back as text (image viewers, tests)."""
    import zlib

    chunks = b""
    for key, value in text.items():
        data = b"tEXt" + key.encode("latin-1") + b"\0" + value.encode("latin-1", "replace")
        chunks += (len(data) - 4).to_bytes(4, "big") + data + \
            zlib.crc32(data).to_bytes(4, "big")
    end_of_header = 8 + 25  # signature, then the IHDR chunk (4 + 4 + 13 + 4 bytes)
    return png[:end_of_header] + chunks + png[end_of_header:]
