"""What a saliency map becomes in a file: a mask, a soft or binary map, a cut-out or an overlay.

One place for ``sodkit predict --save``, the server and the Python API's ``cutout``, so all give
the same pixels (:mod:`sodkit.inference.encode` makes a file's bytes of one image's scores).
Every function takes the probability map at the image's own size (float32 (H, W) in [0, 1])
and, where it needs one, the image (uint8 RGB (H, W, 3)); no torch.

* ``mask``: uint8, ``round(p x 255)``: what ``sodkit eval`` reads (the default).
* ``soft``: 16-bit, ``round(p x 65535)``: the same probability with 257 times finer steps, for
  matting and compositing tools that read 16-bit alpha (``sodkit eval`` reads 8-bit masks).
* ``binary``: 0 or 255, foreground where ``p >= threshold``.
* ``cutout``: RGBA, the image with the mask (as in ``mask``) as alpha (times the image's own
  alpha, where it has one); on a background instead, RGB: a colour, ``blur`` (the photo itself,
  blurred) or another image (scaled to cover the photo, centred). With a foreground estimator
  (:mod:`sodkit.foreground`: ``blur-fusion``, BiRefNet's fast one; ``ml``, pymatting's, the
  ``cutout`` extra) the colours of soft edges are the object's own, without the halo of the old
  background.
* ``overlay``: the image with the object tinted, for looking.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import UserError
from ..foreground import check_estimator, estimate

MODES = ("mask", "soft", "binary", "cutout", "overlay")
NOUNS = {"mask": "mask", "soft": "soft mask", "binary": "binary mask", "cutout": "cut-out",
         "overlay": "overlay"}  # what a file of each mode is called in messages
COLORS = {"white": (255, 255, 255), "black": (0, 0, 0), "grey": (128, 128, 128),
          "gray": (128, 128, 128), "red": (255, 0, 0), "green": (0, 255, 0),
          "blue": (0, 0, 255)}
OVERLAY_ALPHA = 0.5  # how much of the tint covers a pixel of probability 1
_HEX = re.compile(r"#?([0-9a-f]{6}|[0-9a-f]{3})", re.ASCII)
_LEVEL = re.compile(r"\s*([0-9]{1,3})\s*", re.ASCII)  # ASCII digits only: not '²' nor '٣'
BLUR = "blur"  # a background: the photo itself, blurred
BLUR_SIDE = 256  # the blur runs on the photo scaled to this longer side (any size costs alike)
BLUR_SIGMA = 0.02  # its Gaussian's sigma, as a share of the longer side
Color = tuple[int, int, int]
# what a cut-out is composited onto: None (transparency), a colour, BLUR, or an image (uint8 RGB)
Background = Color | str | np.ndarray | None


def _color_problem(what: str, value: object) -> UserError:
    return UserError(f"{what} {value!r}: give a colour name ({', '.join(COLORS)}), #RRGGBB, "
                     f"#RGB or R,G,B with each of R, G, B a whole number from 0 to 255")


def parse_color(text: str, what: str = "colour") -> Color:
    """``white``, ``#RRGGBB``, ``#RGB`` or ``R,G,B`` (0-255 each) as an RGB triple; anything
    else (``256,0,0``, ``1,2``, ``²,1,1``) is a UserError naming ``what``."""
    value = str(text).strip().lower()
    if value in COLORS:
        return COLORS[value]
    match = _HEX.fullmatch(value)
    if match:
        digits = match.group(1)
        digits = "".join(c * 2 for c in digits) if len(digits) == 3 else digits
        return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
    levels = [_LEVEL.fullmatch(part) for part in value.split(",")]
    if len(levels) == 3 and all(m and int(m.group(1)) <= 255 for m in levels):
        return tuple(int(m.group(1)) for m in levels)  # type: ignore[return-value,union-attr]
    raise _color_problem(what, text)


def color_of(value: object, what: str = "colour") -> Color:
    """A colour given as text (:func:`parse_color`) or as three whole numbers in 0-255 (a tuple,
    a list, a 1-D array): the one check the API and the command line share."""
    if isinstance(value, str):
        return parse_color(value, what)
    items = list(value) if isinstance(value, (tuple, list, np.ndarray)) else None
    if items is None or len(items) != 3 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))
            and 0 <= v <= 255 for v in items):
        raise _color_problem(what, value)
    return tuple(int(v) for v in items)  # type: ignore[return-value]


def background_of(value: object, what: str = "--background") -> Background:
    """What ``--background`` / ``cutout(background=...)`` names: None (transparency), a colour
    (:func:`color_of`), ``blur``, or an image file (read as ``sodkit predict`` reads images,
    within the same limits); an image already in memory is the API's to convert
    (:mod:`sodkit.image_input`)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == BLUR:
        return BLUR
    if isinstance(value, str):
        try:
            return parse_color(value, what)
        except UserError:
            if not Path(value).is_file() and Path(value).suffix.lower() not in _IMAGE_SUFFIXES:
                raise UserError(f"{what} {value!r}: not a colour (a name: {', '.join(COLORS)}; "
                                f"#RRGGBB; R,G,B in 0-255), not {BLUR!r}, and no image file of "
                                f"that name") from None
    if isinstance(value, (str, Path)):
        from ..imageio import read_image

        if not Path(value).is_file():
            raise UserError(f"{what}: image file {value} not found")
        return read_image(value)
    return color_of(value, what)


_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif")


def to_uint8(prob: np.ndarray) -> np.ndarray:
    """``round(p x 255)`` as uint8, like the ``mask`` files."""
    return np.clip(np.round(prob.astype(np.float32) * np.float32(255.0)), 0, 255).astype(np.uint8)


def blurred(image: np.ndarray) -> np.ndarray:
    """The photo as a ``blur`` background: a Gaussian of :data:`BLUR_SIGMA` of its longer side,
    computed at :data:`BLUR_SIDE` pixels and scaled back (the same look at any size, bounded
    cost)."""
    height, width = image.shape[:2]
    scale = min(1.0, BLUR_SIDE / max(height, width))
    small = cv2.resize(image, (max(1, round(width * scale)), max(1, round(height * scale))),
                       interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), BLUR_SIGMA * max(small.shape[:2]),
                             borderType=cv2.BORDER_REFLECT)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)


def fitted(background: np.ndarray, height: int, width: int) -> np.ndarray:
    """An image background scaled to cover ``height`` x ``width`` (its aspect kept) and
    cropped to it around its centre."""
    bh, bw = background.shape[:2]
    scale = max(height / bh, width / bw)
    size = (max(width, round(bw * scale)), max(height, round(bh * scale)))
    resized = cv2.resize(background, size, interpolation=cv2.INTER_AREA if scale < 1
                         else cv2.INTER_LINEAR)
    top, left = (size[1] - height) // 2, (size[0] - width) // 2
    return resized[top : top + height, left : left + width]


def backdrop(background: Background, image: np.ndarray) -> np.ndarray | Color:
    """The colour or the (H, W, 3) image that ``image``'s cut-out is composited onto."""
    if isinstance(background, str):  # BLUR: the only text left once parsed
        return blurred(image)
    if isinstance(background, np.ndarray):
        return fitted(background, *image.shape[:2])
    return background  # type: ignore[return-value]


def estimator_name(foreground: bool | str) -> str:
    """A ``foreground`` argument as an estimator's name: True is pymatting's (``ml``, what
    ``--estimate-foreground`` has always meant), False none."""
    if isinstance(foreground, bool):
        return "ml" if foreground else "none"
    return foreground


def cutout(image: np.ndarray, prob: np.ndarray, background: Background = None,
           foreground: bool | str = False, alpha: np.ndarray | None = None) -> np.ndarray:
    """RGBA (H, W, 4) with the mask as alpha, or RGB on ``background`` (:data:`Background`);
    ``foreground``: the estimator of the object's colours on soft edges (``blur-fusion``,
    ``ml``, ``none``; True: ``ml``); ``alpha``: the image's own alpha (uint8), which the mask's
    multiplies (what was transparent stays so)."""
    if background is not None and not isinstance(background, np.ndarray) and (
            background != BLUR):
        background = background_of(background, "background")  # checked here too
    mask = to_uint8(prob)
    rgb = estimate(image, mask, estimator_name(foreground))
    if alpha is not None:
        mask = ((mask.astype(np.uint16) * alpha + 127) // 255).astype(np.uint8)
    if background is None:
        return np.dstack([rgb, mask])
    a = (mask.astype(np.float32) / 255.0)[..., None]
    under = np.asarray(backdrop(background, image), np.float32)
    mixed = rgb.astype(np.float32) * a + under * (1.0 - a)
    return np.clip(np.round(mixed), 0, 255).astype(np.uint8)


def overlay(image: np.ndarray, prob: np.ndarray, tint: tuple[int, int, int] = (255, 0, 0)
            ) -> np.ndarray:
    """The image with the object tinted (``OVERLAY_ALPHA`` of the tint where p = 1)."""
    a = (prob.astype(np.float32) * OVERLAY_ALPHA)[..., None]
    mixed = image.astype(np.float32) * (1.0 - a) + np.asarray(tint, np.float32) * a
    return np.clip(np.round(mixed), 0, 255).astype(np.uint8)


def encode_png(array: np.ndarray) -> bytes:
    """PNG bytes of grey (uint8 or uint16), RGB or RGBA (channels in RGB order)."""
    if array.ndim == 3:
        code = cv2.COLOR_RGBA2BGRA if array.shape[2] == 4 else cv2.COLOR_RGB2BGR
        array = cv2.cvtColor(np.ascontiguousarray(array), code)
    ok, buf = cv2.imencode(".png", array)
    if not ok:
        raise OSError("cannot encode a PNG")
    return buf.tobytes()


@dataclass(frozen=True, eq=False)
class Rendering:
    """How ``sodkit predict --save`` turns each probability map into its PNG (one mode)."""

    mode: str = "mask"
    threshold: float = 0.5
    background: Background = None
    tint: Color = (255, 0, 0)
    foreground: bool | str = False  # the estimator (sodkit.foreground); True: ml

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"--save {self.mode}: choose one of {', '.join(MODES)}")
        if not 0.0 <= self.threshold <= 1.0:
            raise UserError(f"--threshold {self.threshold}: must be in [0, 1]")
        check_estimator(estimator_name(self.foreground))

    @property
    def estimator(self) -> str:
        """The foreground estimator's name (``none``, ``blur-fusion``, ``ml``)."""
        return estimator_name(self.foreground)

    @property
    def needs_image(self) -> bool:
        return self.mode in ("cutout", "overlay")

    def array(self, prob: np.ndarray, image: np.ndarray | None = None,
              alpha: np.ndarray | None = None) -> np.ndarray:
        """The output image for one probability map (and its image, for cutout and overlay;
        ``alpha``: the image's own, which a cut-out keeps)."""
        if self.mode == "mask":
            return to_uint8(prob)
        if self.mode == "soft":
            return np.clip(np.round(prob.astype(np.float64) * 65535.0), 0, 65535).astype(
                np.uint16)
        if self.mode == "binary":
            return np.where(prob >= self.threshold, 255, 0).astype(np.uint8)
        if image is None or image.shape[:2] != prob.shape:
            raise ValueError(f"--save {self.mode} needs the image at the map's size")
        if self.mode == "cutout":
            return cutout(image, prob, self.background, self.foreground, alpha)
        return overlay(image, prob, self.tint)

    def png(self, prob: np.ndarray, image: np.ndarray | None = None,
            alpha: np.ndarray | None = None) -> bytes:
        return encode_png(self.array(prob, image, alpha))
