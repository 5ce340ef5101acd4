"""Foreground colour estimates for cut-outs: the object's own colours where alpha is soft.

A pixel of alpha ``a`` shows ``a F + (1 - a) B``; a cut-out that keeps the image's colour there
keeps a halo of the old background ``B``. An estimator recovers ``F``:

* ``blur-fusion``: the two-pass blur-fusion estimate (Forte and Pitie's fast foreground
  estimation) as BiRefNet's ``image_proc.refine_foreground`` runs it on the CPU
  (``FB_blur_fusion_foreground_estimator_cpu_2``: box radius 90, then 6).
* ``ml``: pymatting's multi-level estimate (``estimate_foreground_ml``; the ``cutout`` extra):
  slower, smoother.
* ``none``: the image's colours as they are (the default of ``predict`` and the API).

Blur-fusion here computes the authors' values (to 1/255: ``benchmarks/foreground_speed.py``)
from fewer passes. A pixel of alpha 1 keeps its colour and one whose second-pass window holds
no alpha gets 0, so only the band ``R2`` of pixels with alpha < 1 within the window of some
alpha > 0 is computed. The first pass's box sums there come from integral images of the uint8
data (exact integer sums, 4 look-ups per pixel, the image's border reflected as ``cv2.blur``
reflects it), and only on the band grown by the second window (``R1``); the second pass box-
filters the 64 px tiles that hold band pixels. Everything else is one copy. Gathers and
scatters use ``np.take`` / ``np.put``: fancy indexing of (n, 3) rows cost 14x more.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from .errors import UserError
from .limits import check_memory

ESTIMATORS = ("blur-fusion", "ml", "none")
FIRST_RADIUS, SECOND_RADIUS = 90, 6  # refine_foreground(r=90) and its second pass (r=6)
EPS = 1e-5  # the authors' guard of each ratio


def check_foreground_estimation() -> None:
    """Foreground estimation needs pymatting (the ``cutout`` extra): asked before any work."""
    try:
        foreground_estimator()
    except ImportError:
        raise UserError("foreground estimation needs pymatting: pip install -e '.[cutout]' "
                        "(or pip install pymatting)") from None


@functools.cache
def foreground_estimator() -> Callable[..., np.ndarray]:
    """pymatting's multi-level foreground estimate (``estimate_foreground_ml``), loaded alone.

    ``import pymatting`` imports every one of its subpackages, whose numba functions (each
    declared with its signature) compile as they are defined: 43 s of CPU on the first import
    after an install, before numba's cache serves the next ones. The estimator's module needs
    numpy and numba only (3.5 s to compile): it is loaded by itself under its own name, so the
    cache files it writes are the ones a plain ``import pymatting`` reads, and the other way
    round. A pymatting laid out otherwise is imported whole. ImportError if it is missing."""
    name = "pymatting.foreground.estimate_foreground_ml"
    if name not in sys.modules:
        spec = importlib.util.find_spec("pymatting")  # without importing it
        if spec is None or spec.origin is None:
            raise ImportError("pymatting")
        source = Path(spec.origin).parent / "foreground" / "estimate_foreground_ml.py"
        if not source.is_file():
            from pymatting import estimate_foreground_ml
            return estimate_foreground_ml
        module_spec = importlib.util.spec_from_file_location(name, source)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module  # numba's cache finds the module by this name
        try:
            module_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name].estimate_foreground_ml


# the peak memory of pymatting's multi-level estimate of one image, per pixel (float32 copies
# of the image and alpha, the foreground and background at two levels, the result): 76 bytes
# measured at 1 and 4 megapixels, 71 at 16 (96-98 when it was given float64);
# benchmarks/RESULTS.md, "Memory of sodkit predict"
ML_BYTES_PER_PIXEL = 80


def check_foreground_memory(height: int, width: int, source: object = "the image") -> None:
    """Refuse pymatting's estimate of an image whose pixels times :data:`ML_BYTES_PER_PIXEL`
    exceed the memory budget (:func:`sodkit.limits.check_memory`), before it starts: 36
    megapixels need about 2.7 GiB."""
    check_memory(height * width * ML_BYTES_PER_PIXEL,
                 f"foreground estimation of {source} ({width}x{height}, "
                 f"{height * width / 1e6:.0f} megapixels, {ML_BYTES_PER_PIXEL} bytes a "
                 f"pixel)", "drop --estimate-foreground / --foreground ml (foreground='ml'; "
                 "blur-fusion needs far less), or give a smaller image")


def estimate_foreground(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The object's own colours where alpha (float in [0, 1]) is soft: pymatting's multi-level
    estimate. It computes in float32: given float32 rather than float64, the peak is 76 bytes a
    pixel instead of 96-98. Refused before it starts where the image's pixels need more memory
    than the budget (:func:`check_foreground_memory`)."""
    check_foreground_estimation()
    check_foreground_memory(*alpha.shape[:2])
    scaled = image.astype(np.float32)
    scaled *= np.float32(1 / 255)
    fg = foreground_estimator()(scaled, alpha.astype(np.float32, copy=False))
    del scaled
    fg *= np.float32(255)
    return np.clip(np.round(fg, out=fg), 0, 255, out=fg).astype(np.uint8)


def check_estimator(name: str) -> str:
    """``name`` if it is an estimator (``ml`` also needs pymatting); UserError otherwise."""
    if name not in ESTIMATORS:
        raise UserError(f"foreground estimator {name!r}: choose one of {', '.join(ESTIMATORS)}")
    if name == "ml":
        check_foreground_estimation()
    return name


def _grow(mask: np.ndarray, radius: int) -> np.ndarray:
    """``mask`` dilated by a (2 radius + 1) square: a superset of every box window's reach."""
    kernel = np.ones((2 * radius + 1, 2 * radius + 1), np.uint8)
    return cv2.dilate(mask.view(np.uint8), kernel).view(bool)


def _bounds(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) of the mask's true pixels, bottom / right exclusive."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def _span(low: int, high: int, before: int, after: int, length: int
          ) -> tuple[int, int, int, int, int]:
    """Along one axis, for the windows of pixels [low, high): the image's part to copy
    [start, stop), the reflected padding before and after it, and the offset of ``low -
    before`` in the padded copy (the part covers every row the reflection copies)."""
    pad_before, pad_after = max(before - low, 0), max(high + after - length, 0)
    start = max(0, min(low - before, length - 1 - pad_after))
    stop = min(length, max(high + after, pad_before + 1))
    return start, stop, pad_before, pad_after, (low - before) - (start - pad_before)


def _window_area(array: np.ndarray, bounds: tuple[int, int, int, int], size: int
                 ) -> np.ndarray:
    """What ``cv2.blur(array, (size, size))`` reads for the pixels in ``bounds``: the area
    around them, the image's border reflected (101) where the windows cross it."""
    top, bottom, left, right = bounds
    before, after = size // 2, size - 1 - size // 2
    y0, y1, above, below, dy = _span(top, bottom, before, after, array.shape[0])
    x0, x1, ahead, behind, dx = _span(left, right, before, after, array.shape[1])
    area = cv2.copyMakeBorder(array[y0:y1, x0:x1], above, below, ahead, behind,
                              cv2.BORDER_REFLECT_101)
    return area[dy:dy + bottom - top + before + after, dx:dx + right - left + before + after]


def _integral(area: np.ndarray) -> np.ndarray:
    """The integral image of a uint8 area, flattened to (pixels, channels): int32 (exact while
    255 x pixels < 2^31), float64 beyond."""
    exact_int = area.shape[0] * area.shape[1] * 255 < 2 ** 31
    integral = cv2.integral(area, sdepth=cv2.CV_32S if exact_int else cv2.CV_64F)
    return integral.reshape(integral.shape[0] * integral.shape[1], -1)


def _box_sums(area: np.ndarray, size: int, corners: np.ndarray) -> np.ndarray:
    """Sums of ``size`` x ``size`` windows of a uint8 area (from :func:`_window_area`) whose
    top-left corners are at the flat indices ``corners`` of its integral image, as
    (n, channels) float64: four look-ups each, exact."""
    flat = _integral(area)
    width = area.shape[1] + 1
    sums = np.take(flat, corners + size * width + size, axis=0)  # in the integral's type:
    sums -= np.take(flat, corners + size, axis=0)  # a window's int32 sum fits, whatever the
    sums -= np.take(flat, corners + size * width, axis=0)  # corners' values (wrapping)
    sums += np.take(flat, corners, axis=0)
    return sums.astype(np.float64)


def _weighted_sums(img: np.ndarray, a: np.ndarray, size: int, corners: np.ndarray
                   ) -> np.ndarray:
    """Window sums of ``I a`` (uint8 x uint8, up to 65025): its high and low bytes summed
    apart in exact integer integrals, then ``256 high + low``."""
    weighted = cv2.multiply(img, cv2.merge([a, a, a]), dtype=cv2.CV_16U)
    high = _box_sums((weighted >> 8).astype(np.uint8), size, corners)
    high *= 256
    high += _box_sums(weighted.astype(np.uint8), size, corners)  # the low byte
    return high


def _first_pass(image: np.ndarray, alpha: np.ndarray, reach: np.ndarray, size: int
                ) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int, int], np.ndarray]:
    """The first pass (F = B = the image) at the ``reach`` pixels: the foreground estimate and
    the blurred background, float64 (n, 3) in [0, 1]; the reach's bounds and its pixels' flat
    indices inside them. Box sums from integral images of the uint8 data."""
    bounds = _bounds(reach)
    top, bottom, left, right = bounds
    flat = np.flatnonzero(reach[top:bottom, left:right])
    rows, cols = np.divmod(flat, right - left)
    corners = rows * (right - left + size) + cols  # in the integral image of the area
    img = _window_area(image, bounds, size)
    a = _window_area(alpha, bounds, size)
    count = float(size * size)
    blurred_alpha = _box_sums(a, size, corners) / (count * 255)
    blurred_ia = _weighted_sums(img, a, size, corners) / (count * 255 * 255)
    blurred_i = _box_sums(img, size, corners) / (count * 255)
    blurred_fg = blurred_ia / (blurred_alpha + EPS)
    blurred_bg = (blurred_i - blurred_ia) / ((1 - blurred_alpha) + EPS)  # I (1 - a) = I - I a
    at = (rows + top) * image.shape[1] + cols + left
    a_px = np.take(alpha.reshape(-1), at)[:, None] / 255.0
    colour = np.take(image.reshape(-1, 3), at, axis=0) / 255.0
    fg = blurred_fg + a_px * (colour - a_px * blurred_fg - (1 - a_px) * blurred_bg)
    return np.clip(fg, 0, 1), blurred_bg, bounds, flat


TILE = 64  # the second pass box-filters the tiles of this side that hold band pixels


def _second_sums(maps: list[np.ndarray], band: np.ndarray
                 ) -> tuple[np.ndarray, list[np.ndarray]]:
    """The band's pixels (flat indices in the box, grouped by tile) and the second pass's box
    means of each map there: ``cv2.blur`` of each tile holding band pixels, grown by the
    window's reach (the box's border reflected where the tile meets it, as the whole image's
    would be: a band pixel's window crosses the box only at the image's border)."""
    height, width = band.shape
    across = -(-width // TILE)
    where = np.flatnonzero(band)
    rows, cols = np.divmod(where, width)
    tiles = (rows // TILE) * across + cols // TILE
    order = np.argsort(tiles, kind="stable")
    where, rows, cols, tiles = where[order], rows[order], cols[order], tiles[order]
    starts = np.flatnonzero(np.diff(tiles, prepend=-1))
    outs = [np.empty((where.size, 1 if m.ndim == 2 else m.shape[2]), np.float32) for m in maps]
    reach, size = SECOND_RADIUS // 2, (SECOND_RADIUS, SECOND_RADIUS)
    for start, stop in zip(starts, [*starts[1:], where.size], strict=True):
        tile_row, tile_col = divmod(int(tiles[start]), across)
        y0, x0 = max(tile_row * TILE - reach, 0), max(tile_col * TILE - reach, 0)
        y1 = min((tile_row + 1) * TILE + reach, height)
        x1 = min((tile_col + 1) * TILE + reach, width)
        local = (rows[start:stop] - y0) * (x1 - x0) + cols[start:stop] - x0
        for out, array in zip(outs, maps, strict=True):
            blurred = cv2.blur(array[y0:y1, x0:x1], size)
            out[start:stop] = np.take(blurred.reshape(-1, out.shape[1]), local, axis=0)
    return where, outs


def _band(image: np.ndarray, alpha: np.ndarray, radius: int
          ) -> tuple[np.ndarray, np.ndarray] | None:
    """The second pass at the band R2: its pixels' flat indices in the image and their float64
    (n, 3) colours; None when there is no band (alpha all 0 or 1 within every window)."""
    band = (alpha != 255) & _grow(alpha > 0, SECOND_RADIUS // 2)  # R2: computed
    if not band.any():
        return None
    reach = _grow(band, SECOND_RADIUS // 2)  # R1: what R2's windows read
    fg, bg, bounds, flat = _first_pass(image, alpha, reach, radius)
    top, bottom, left, right = bounds
    inner = (slice(top, bottom), slice(left, right))
    a_box = alpha[inner].astype(np.float32)
    a_box *= np.float32(1 / 255)
    a_reach = np.take(a_box.reshape(-1), flat)[:, None]
    shape = (bottom - top, right - left, 3)
    fg_a, bg_a = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    triples = (flat[:, None] * 3 + np.arange(3)).reshape(-1)
    np.put(fg_a.reshape(-1), triples, fg * a_reach)
    np.put(bg_a.reshape(-1), triples, bg * (1 - a_reach))
    where, (blurred_alpha, blurred_fg, blurred_bg) = _second_sums([a_box, fg_a, bg_a],
                                                                  band[inner])
    blurred_alpha = blurred_alpha.astype(np.float64)
    blurred_fg = blurred_fg / (blurred_alpha + EPS)
    blurred_bg = blurred_bg / ((1 - blurred_alpha) + EPS)
    rows, cols = np.divmod(where, right - left)
    at = (rows + top) * image.shape[1] + cols + left
    a = np.take(alpha.reshape(-1), at)[:, None] / 255.0
    colour = np.take(image.reshape(-1, 3), at, axis=0) / 255.0
    fg2 = blurred_fg + a * (colour - a * blurred_fg - (1 - a) * blurred_bg)
    return at, np.clip(fg2, 0, 1)


def _put(out: np.ndarray, at: np.ndarray, colours: np.ndarray) -> np.ndarray:
    """``out`` (H, W, 3) with the pixels at flat indices ``at`` set to ``colours`` (n, 3)."""
    triples = (at[:, None] * 3 + np.arange(3)).reshape(-1)
    np.put(out.reshape(-1), triples, colours)
    return out


def blur_fusion(image: np.ndarray, alpha: np.ndarray, radius: int = FIRST_RADIUS
                ) -> np.ndarray:
    """The blur-fusion foreground of a uint8 RGB image (H, W, 3) under a uint8 alpha (H, W),
    as float32 (H, W, 3) in [0, 1] (the authors' ``refine_foreground`` before its uint8)."""
    out = cv2.copyTo(image, (alpha == 255).view(np.uint8)).astype(np.float32)
    out *= np.float32(1 / 255)
    band = _band(image, alpha, radius)
    return out if band is None else _put(out, *band)


def blur_fusion_uint8(image: np.ndarray, alpha: np.ndarray, radius: int = FIRST_RADIUS
                      ) -> np.ndarray:
    """:func:`blur_fusion` rounded to uint8, without a float copy of the whole image."""
    out = cv2.copyTo(image, (alpha == 255).view(np.uint8))
    band = _band(image, alpha, radius)
    if band is None:
        return out
    at, colours = band
    return _put(out, at, np.round(colours * 255).astype(np.uint8))


def estimate(image: np.ndarray, alpha: np.ndarray, estimator: str) -> np.ndarray:
    """The uint8 RGB foreground of ``image`` under uint8 ``alpha`` by ``estimator``."""
    if estimator == "none":
        return image
    if estimator == "ml":
        return estimate_foreground(image, alpha / np.float32(255))
    return blur_fusion_uint8(image, alpha)
