"""What a saliency map becomes in a file: a mask, a soft or binary map, a cut-out or an overlay.

One place for ``sodkit predict --save`` and the Python API's ``cutout``, so both give the same
pixels. Every function takes the probability map at the image's own size (float32 (H, W) in
[0, 1]) and, where it needs one, the image (uint8 RGB (H, W, 3)); no torch.

* ``mask``: uint8, ``round(p x 255)``: what ``sodkit eval`` reads (the default).
* ``soft``: 16-bit, ``round(p x 65535)``: the same probability with 257 times finer steps, for
  matting and compositing tools that read 16-bit alpha (``sodkit eval`` reads 8-bit masks).
* ``binary``: 0 or 255, foreground where ``p >= threshold``.
* ``cutout``: RGBA, the image with the mask (as in ``mask``) as alpha; on a solid background
  colour instead, RGB. With a foreground estimator (:mod:`sodkit.foreground`: ``blur-fusion``,
  BiRefNet's fast one; ``ml``, pymatting's, the ``cutout`` extra) the colours of soft edges are
  the object's own, without the halo of the old background.
* ``overlay``: the image with the object tinted, for looking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import cv2
import numpy as np

from .errors import UserError
from .foreground import (  # noqa: F401 (pymatting's estimator: its former home, kept importable)
    check_foreground_estimation,
    estimate_foreground,
    foreground_estimator,
)

MODES = ("mask", "soft", "binary", "cutout", "overlay")
COLORS = {"white": (255, 255, 255), "black": (0, 0, 0), "grey": (128, 128, 128),
          "gray": (128, 128, 128), "red": (255, 0, 0), "green": (0, 255, 0),
          "blue": (0, 0, 255)}
OVERLAY_ALPHA = 0.5  # how much of the tint covers a pixel of probability 1
_HEX = re.compile(r"^#?([0-9a-fA-F]{6}|[0-9a-fA-F]{3})$")


def parse_color(text: str) -> tuple[int, int, int]:
    """``white``, ``#RRGGBB``, ``#RGB`` or ``R,G,B`` (0-255 each) as an RGB triple."""
    value = text.strip().lower()
    if value in COLORS:
        return COLORS[value]
    match = _HEX.match(value)
    if match:
        digits = match.group(1)
        digits = "".join(c * 2 for c in digits) if len(digits) == 3 else digits
        return tuple(int(digits[i : i + 2], 16) for i in (0, 2, 4))  # type: ignore[return-value]
    parts = value.split(",")
    if len(parts) == 3 and all(p.strip().isdigit() and int(p) <= 255 for p in parts):
        return tuple(int(p) for p in parts)  # type: ignore[return-value]
    raise UserError(f"colour {text!r}: give a name ({', '.join(COLORS)}), #RRGGBB or R,G,B")


def to_uint8(prob: np.ndarray) -> np.ndarray:
    """``round(p x 255)`` as uint8, like the ``mask`` files."""
    return np.clip(np.round(prob.astype(np.float32) * np.float32(255.0)), 0, 255).astype(np.uint8)


def estimator_name(foreground: bool | str) -> str:
    """A ``foreground`` argument as an estimator's name: True is pymatting's (``ml``, what
    ``--estimate-foreground`` has always meant), False none."""
    if isinstance(foreground, bool):
        return "ml" if foreground else "none"
    return foreground


def cutout(image: np.ndarray, prob: np.ndarray, background: tuple[int, int, int] | None = None,
           foreground: bool | str = False) -> np.ndarray:
    """RGBA (H, W, 4) with the mask as alpha, or RGB on ``background``; ``foreground``: the
    estimator of the object's colours on soft edges (``blur-fusion``, ``ml``, ``none``;
    True: ``ml``)."""
    from .foreground import estimate

    alpha = to_uint8(prob)
    rgb = estimate(image, alpha, estimator_name(foreground))
    if background is None:
        return np.dstack([rgb, alpha])
    a = (alpha.astype(np.float32) / 255.0)[..., None]
    mixed = rgb.astype(np.float32) * a + np.asarray(background, np.float32) * (1.0 - a)
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


@dataclass(frozen=True)
class Rendering:
    """How ``sodkit predict --save`` turns each probability map into its PNG."""

    mode: str = "mask"
    threshold: float = 0.5
    background: tuple[int, int, int] | None = None
    tint: tuple[int, int, int] = (255, 0, 0)
    foreground: bool | str = False  # the estimator (sodkit.foreground); True: ml

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"--save {self.mode}: choose one of {', '.join(MODES)}")
        if not 0.0 <= self.threshold <= 1.0:
            raise UserError(f"--threshold {self.threshold}: must be in [0, 1]")
        from .foreground import check_estimator

        check_estimator(estimator_name(self.foreground))

    @property
    def needs_image(self) -> bool:
        return self.mode in ("cutout", "overlay")

    def array(self, prob: np.ndarray, image: np.ndarray | None = None) -> np.ndarray:
        """The output image for one probability map (and its image, for cutout and overlay)."""
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
            return cutout(image, prob, self.background, self.foreground)
        return overlay(image, prob, self.tint)

    def png(self, prob: np.ndarray, image: np.ndarray | None = None) -> bytes:
        return encode_png(self.array(prob, image))
