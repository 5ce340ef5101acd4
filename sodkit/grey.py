"""Colour maps made grey exactly as ``cv2.imread(path, cv2.IMREAD_GRAYSCALE)`` makes them.

PySODEvalToolkit and PySODMetrics' examples read every map with ``cv2.imread(p, 0)``; a map
saved in colour (or as 16-bit) must become the grey levels that call returns, to the bit, or the
scores move (one level apart on 37-45% of a tinted map's pixels moved wF by up to 9e-3). That
call does not use ``cvtColor``'s rounding:

- a PNG is converted by libpng: ``png_set_rgb_to_gray`` with OpenCV's 0.299 / 0.587 weights,
  which libpng turns into 9797 / 19234 over 2^15 (``29900 * 32768 / 100000``, truncated; blue
  gets the rest, 3737) and applies truncating to 8-bit samples
  (``(9797 R + 19234 G + 3737 B) >> 15``: equal to OpenCV 4.14 on all 2^24 colours, where the
  rounded 9798 / 19235 / 3735 differ on 75,962) and rounding to 16-bit ones, which are then
  stripped to their high byte (``png_set_strip_16``: ``>> 8``); the alpha channel is dropped
  first;
- a JPEG is decoded to its luminance by libjpeg, which no formula on the decoded RGB repeats;
- other formats decode in colour and are converted by OpenCV.

So a PNG's grey is computed here from the pixels already decoded (a few array passes; a second
decode would double the read), and any other file, or a PNG whose colour chunks could make libpng
correct gamma on the way, is decoded once more by OpenCV as grey: equal by construction.
"""

from __future__ import annotations

import cv2
import numpy as np

# libpng's fixed-point weights for OpenCV's png_set_rgb_to_gray(png, 1, 0.299, 0.587): each
# coefficient in 1/100000 times 32768 / 100000, truncated
RED, GREEN = 29900 * 32768 // 100000, 58700 * 32768 // 100000  # 9797, 19234
BLUE = 32768 - RED - GREEN  # 3737
# chunks with which libpng may build gamma tables for the conversion: such files are decoded again
COLOUR_CHUNKS = frozenset({b"gAMA", b"sRGB", b"iCCP", b"cHRM"})


def png_grey(bgr: np.ndarray) -> np.ndarray:
    """libpng's grey of decoded (H, W, 3 or 4) BGR(A) uint8 or uint16 pixels, as uint8."""
    b, g, r = (bgr[:, :, i].astype(np.uint32) for i in range(3))
    total = r * RED
    total += g * GREEN
    total += b * BLUE
    if bgr.dtype == np.uint8:
        return (total >> 15).astype(np.uint8)
    total += 16384  # libpng rounds its 16-bit conversion, then keeps the high byte
    return (total >> 23).astype(np.uint8)


def decoded_grey(encoded: bytes) -> np.ndarray | None:
    """OpenCV's own grey decode of a file's bytes, before any EXIF orientation (the caller
    turns it as it turns every image); None if it does not decode."""
    data = np.frombuffer(encoded, dtype=np.uint8)
    return cv2.imdecode(data, cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION)


def to_uint8(array: np.ndarray) -> np.ndarray:
    """Any decoded depth as 8 bits, as OpenCV reads it (16-bit: the high byte)."""
    if array.dtype == np.uint8:
        return array
    if array.dtype == np.uint16:
        # the high byte, as OpenCV's imread (libpng's strip_16) keeps it: cv2.imread(p, 0) and
        # cv2.imread(p) of a 16-bit PNG read so (sodkit/grey.py)
        return (array >> 8).astype(np.uint8)
    if np.issubdtype(array.dtype, np.floating):  # float TIFFs: assume [0, 1]
        return np.clip(np.rint(array * 255.0), 0, 255).astype(np.uint8)
    return np.clip(array, 0, 255).astype(np.uint8)
