"""Maps saved in colour or as 16-bit read exactly as ``cv2.imread(p, cv2.IMREAD_GRAYSCALE)``
reads them (issue #25), the reader of PySODEvalToolkit and PySODMetrics' examples. Before, sodkit
rounded where libpng truncates (``(9797 R + 19234 G + 3737 B) >> 15``) and divided 16-bit values
by 257 where libpng keeps the high byte: one grey level apart on 37-45% of a tinted map's pixels.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.imageio import read_image, read_mask
from sodkit.mask_encoding import take_notes


def soft_map(height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """A soft saliency map: every grey level, blurred edges."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((height, width), np.uint8)
    cv2.ellipse(mask, (width // 2, height // 2), (width // 3, height // 3), 0, 0, 360, 255, -1)
    noise = rng.integers(0, 40, (height, width), dtype=np.uint8)
    return cv2.GaussianBlur(cv2.add(mask, noise), (9, 9), 3)


def tinted(grey: np.ndarray, seed: int = 1) -> np.ndarray:
    """Grey saved as BGR with channels apart by up to 40 levels (a tint, a colour map's hue
    shift): still grey to sodkit's encoding check, but R, G and B differ on most pixels."""
    rng = np.random.default_rng(seed)
    shift = rng.integers(-20, 21, (*grey.shape, 3))
    return np.clip(grey[:, :, None].astype(np.int32) + shift, 0, 255).astype(np.uint8)


def wide(image: np.ndarray, seed: int = 2) -> np.ndarray:
    """8-bit pixels widened to 16 bits with noise in the low byte: not multiples of 257."""
    rng = np.random.default_rng(seed)
    return image.astype(np.uint16) * 256 + rng.integers(0, 256, image.shape, dtype=np.uint16)


def with_chunk(png: bytes, kind: bytes, payload: bytes) -> bytes:
    """The PNG with one more chunk right after IHDR."""
    chunk = (struct.pack(">I", len(payload)) + kind + payload
             + struct.pack(">I", zlib.crc32(kind + payload)))
    return png[:33] + chunk + png[33:]


def assert_reads_as_opencv(path: Path) -> None:
    ours = read_mask(path)
    theirs = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    assert ours.dtype == np.uint8 and ours.shape == theirs.shape, path.name
    differ = float(np.mean(ours != theirs))
    assert differ == 0, f"{path.name}: {differ:.1%} of pixels differ from cv2.imread(p, 0)"


@pytest.mark.parametrize("name", ["tinted.png", "tinted_alpha.png", "tinted.bmp", "tinted.tif",
                                  "tinted.webp", "tinted.jpg", "tinted16.png", "tinted16.tif"])
def test_tinted_colour_maps_read_as_opencv_grey(tmp_path, name):
    bgr = tinted(soft_map())
    if "alpha" in name:
        bgr = np.dstack([bgr, np.full(bgr.shape[:2], 77, np.uint8)])
    if "16" in name:
        bgr = wide(bgr)
    path = tmp_path / name
    params = [cv2.IMWRITE_WEBP_QUALITY, 101] if name.endswith(".webp") else []  # lossless
    assert cv2.imwrite(str(path), bgr, params)
    take_notes()
    assert_reads_as_opencv(path)
    assert take_notes() == {}  # grey stored otherwise: no conversion to announce


def test_the_old_rounding_differed_on_many_pixels():
    """The case the issue measured: rounding (cvtColor) against libpng's truncation."""
    bgr = tinted(soft_map())
    from sodkit.grey import png_grey

    assert np.mean(png_grey(bgr) != cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY)) > 0.2


@pytest.mark.parametrize("name", ["grey16.png", "grey16.tif"])
def test_16_bit_grey_maps_read_as_opencv_grey(tmp_path, name):
    values = wide(soft_map())
    assert (values % 257 != 0).mean() > 0.9
    path = tmp_path / name
    assert cv2.imwrite(str(path), values)
    assert_reads_as_opencv(path)


def test_a_png_with_a_gamma_chunk_reads_as_opencv_grey(tmp_path):
    """gAMA / sRGB may make libpng correct gamma while it converts: decoded again by OpenCV."""
    ok, png = cv2.imencode(".png", tinted(soft_map()))
    assert ok
    for kind, payload in ((b"gAMA", struct.pack(">I", 45455)), (b"sRGB", b"\x00")):
        path = tmp_path / f"{kind.decode()}.png"
        path.write_bytes(with_chunk(png.tobytes(), kind, payload))
        assert_reads_as_opencv(path)


def test_16_bit_images_read_as_opencv_colour(tmp_path):
    """Images (read_image) keep the high byte of 16-bit samples, as cv2.imread(p) does."""
    path = tmp_path / "image16.png"
    assert cv2.imwrite(str(path), wide(tinted(soft_map())))
    np.testing.assert_array_equal(read_image(path), cv2.imread(str(path))[:, :, ::-1])


def test_libpng_weights_on_random_colours(tmp_path):
    """``png_grey`` against OpenCV on 262,144 random colours (any spread; 8- and 16-bit)."""
    from sodkit.grey import png_grey

    bgr = np.random.default_rng(3).integers(0, 256, (512, 512, 3), dtype=np.uint8)
    for name, pixels in (("colours.png", bgr), ("colours16.png", wide(bgr))):
        assert cv2.imwrite(str(tmp_path / name), pixels)
        np.testing.assert_array_equal(png_grey(pixels),
                                      cv2.imread(str(tmp_path / name), cv2.IMREAD_GRAYSCALE))
