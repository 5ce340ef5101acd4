"""Trimaps for the matting metrics: read, checked against their GT, matched by stem.

A trimap marks each pixel known background (0), known foreground (255) or unknown (128); the
matting metrics (``--compute matting``) then measure the unknown pixels only, with the
prediction set to the known values elsewhere (sodkit/metrics/matting.py). A trimap of any other
values, another size than its GT, or without an unknown pixel is refused by name: its metrics
would be undefined (0 / 0) or silently measure something else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import DataError

VALUES = (0, 128, 255)


def check_trimap(trimap: np.ndarray, shape: tuple[int, ...], path: str | Path) -> np.ndarray:
    """The trimap, if it is one for a GT of ``shape``; DataError naming ``path`` otherwise."""
    if trimap.shape != tuple(shape[:2]):
        raise DataError(f"trimap {path} is {trimap.shape[0]}x{trimap.shape[1]} but its GT is "
                        f"{shape[0]}x{shape[1]} (HxW): give the trimap of the GT's size")
    counts = np.bincount(trimap.ravel(), minlength=256)
    others = np.flatnonzero(counts)
    others = others[~np.isin(others, VALUES)]
    if others.size:
        raise DataError(f"trimap {path} holds values other than 0, 128 and 255 (e.g. "
                        f"{', '.join(map(str, others[:5]))}): a trimap marks background 0, "
                        f"unknown 128, foreground 255 (a JPEG trimap is not exact: use PNG)")
    if counts[128] == 0:
        raise DataError(f"trimap {path} has no unknown pixel (value 128): the matting metrics "
                        f"over its unknown region are undefined; drop --trimaps (whole-image "
                        f"metrics) or fix the trimap")
    return trimap


def read_trimap(path: str | Path, shape: tuple[int, ...]) -> np.ndarray:
    """The uint8 trimap at ``path``, checked against its GT's (H, W) ``shape``."""
    from .imageio import read_mask

    return check_trimap(read_mask(path), shape, path)


def match_trimaps(folder: Path, stems: list[str], what: str) -> dict[str, Path]:
    """Each stem's trimap file in ``folder``; UserError naming the missing ones."""
    from .errors import UserError
    from .imageio import list_images
    from .text import plural

    found = list_images(folder)
    missing = [stem for stem in stems if stem not in found]
    if missing:
        shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise UserError(f"{what} {folder}: no trimap for {plural(len(missing), 'GT stem')}: "
                        f"{shown}")
    return {stem: found[stem] for stem in stems}
