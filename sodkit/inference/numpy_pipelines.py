"""The inference pipelines (:mod:`sodkit.inference.pipelines`) in numpy, OpenCV and Pillow,
for the start that imports no torch (:mod:`sodkit.commands.predict_lean`, running a cached
ONNX graph): the same input side, test-time augmentation and output side as
:mod:`~sodkit.inference.preprocess`, :mod:`~sodkit.inference.forward` and
:mod:`~sodkit.inference.postprocess`, each step the same operation:

- the antialiased bilinear resize of ``sodkit``'s :class:`~sodkit.inference.preprocess.
  TestTransform` (torchvision's on uint8, PyTorch's kernel after Pillow-SIMD's: a triangle
  filter as wide as the scale, weights in int16 at the precision the largest allows, the
  horizontal pass first, each pass rounded to uint8) is :func:`resize_antialiased`, the same
  integers in numpy (equal on every pixel in the tests; Pillow's own ``BILINEAR``, 22-bit
  weights, is off by 1 on about 0.15% of pixels and stays MINet's and the model card's, as
  their authors call it);
- the bilinear resize back with ``align_corners=False`` is OpenCV's ``INTER_LINEAR`` on
  float32; BiRefNet's ``align_corners=True`` is :func:`resize_corners` (separable, float32);
- rounding is half to even (``torch.round`` and ``np.round``), truncation is ``astype``.

The masks agree with the torch path's to 1/255 (tests/test_predict_lean.py). An object here
answers what :func:`~sodkit.inference.encode.encode_outputs` asks of a postprocess, so the
PNGs are encoded by the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

Run = Callable[[np.ndarray], np.ndarray]  # a normalised batch (B, 3, S, S) -> scores


def sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x, dtype=np.float32))).astype(np.float32, copy=False)


def resize_linear(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w) float32 -> (H, W): bilinear, ``align_corners=False`` (no antialiasing)."""
    if array.shape == tuple(size):
        return array
    return cv2.resize(array, (size[1], size[0]), interpolation=cv2.INTER_LINEAR)


def _corner_weights(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale = (src - 1) / (dst - 1) if dst > 1 else 0.0
    pos = np.arange(dst, dtype=np.float32) * np.float32(scale)
    low = np.minimum(np.floor(pos).astype(np.int64), src - 1)
    high = np.minimum(low + 1, src - 1)
    return low, high, (pos - low).astype(np.float32)


def resize_corners(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """(h, w) float32 -> (H, W): bilinear, ``align_corners=True`` (BiRefNet's resize back)."""
    y0, y1, fy = _corner_weights(array.shape[0], size[0])
    x0, x1, fx = _corner_weights(array.shape[1], size[1])
    rows = array[y0] * (1 - fy)[:, None] + array[y1] * fy[:, None]
    return rows[:, x0] * (1 - fx) + rows[:, x1] * fx


def _aa_weights(insize: int, outsize: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Each output's source indices (out, K), int16-range weights (out, K) and their
    precision in bits, for an antialiased bilinear resize of ``insize`` to ``outsize``."""
    scale = insize / outsize
    support, inverse = (scale, 1.0 / scale) if scale >= 1.0 else (1.0, 1.0)
    centers = scale * (np.arange(outsize) + 0.5)
    low = np.maximum((centers - support + 0.5).astype(np.int64), 0)
    count = np.minimum((centers + support + 0.5).astype(np.int64), insize) - low
    taps = np.arange(int(count.max()))
    weight = np.clip(1.0 - np.abs((taps[None] + low[:, None] - centers[:, None] + 0.5)
                                  * inverse), 0.0, None)
    weight[taps[None] >= count[:, None]] = 0.0
    weight /= weight.sum(axis=1, keepdims=True)
    bits = 0
    while bits < 22 and int(0.5 + weight.max() * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    return np.minimum(low[:, None] + taps[None], insize - 1), np.floor(
        0.5 + weight * (1 << bits)).astype(np.float32), bits


def _aa_rows(array: np.ndarray, outsize: int) -> np.ndarray:
    """Axis 0 of uint8 ``array`` resized (antialiased bilinear), rounded to uint8. The sums
    are integers below 2**24 (non-negative weights summing to about 2**15, times 255), so
    float32 holds them exactly."""
    if array.shape[0] == outsize:
        return array
    index, weight, bits = _aa_weights(array.shape[0], outsize)
    acc = np.full((outsize, *array.shape[1:]), 1 << (bits - 1), np.float32)
    term = np.empty_like(acc)
    shape = (-1,) + (1,) * (array.ndim - 1)
    for tap in range(index.shape[1]):
        np.multiply(array[index[:, tap]], weight[:, tap].reshape(shape), out=term)
        acc += term
    acc *= np.float32(1.0 / (1 << bits))
    return np.clip(np.floor(acc, out=acc), 0, 255).astype(np.uint8)


def resize_antialiased(image: np.ndarray, side: int) -> np.ndarray:
    """uint8 (H, W, C) -> (side, side, C) as torchvision's antialiased bilinear resize of a
    uint8 image: the horizontal pass, then the vertical."""
    across = _aa_rows(np.ascontiguousarray(image.transpose(1, 0, 2)), side)
    return _aa_rows(np.ascontiguousarray(across.transpose(1, 0, 2)), side)


@dataclass(frozen=True)
class NumpyPipeline:
    """One pipeline by name (``data.preprocess``), at input side ``size``."""

    name: str
    size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]

    @property
    def coarse(self) -> bool:
        return self.name == "f3net"

    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """uint8 RGB (H, W, 3) -> float32 (3, S, S), as the pipeline's transform."""
        side = (self.size, self.size)
        if self.name == "f3net":
            mean = np.asarray(self.mean, np.float64) * 255.0
            std = np.asarray(self.std, np.float64) * 255.0
            normalised = (image.astype(np.float32) - mean) / std
            resized = cv2.resize(normalised, side, interpolation=cv2.INTER_LINEAR)
            return np.ascontiguousarray(resized.transpose(2, 0, 1), dtype=np.float32)
        if self.name == "birefnet":
            resized = cv2.resize(image, side, interpolation=cv2.INTER_LINEAR)
        elif self.name == "sodkit":
            resized = resize_antialiased(image, self.size)
        else:  # minet, birefnet-card: Pillow's antialiased bilinear
            from PIL import Image

            resized = np.asarray(Image.fromarray(image).resize(side, Image.BILINEAR))
        scaled = resized.astype(np.float32) / np.float32(255.0)
        normalised = (scaled - np.asarray(self.mean, np.float32)) / np.asarray(self.std,
                                                                               np.float32)
        return np.ascontiguousarray(normalised.transpose(2, 0, 1))

    def scores(self, run: Run, batch: np.ndarray, tta: Sequence[str] = ()) -> np.ndarray:
        """What :meth:`to_mask` takes, for a batch (B, 3, S, S): probabilities (hflip: the
        mean of both passes'), or F3Net's coarse logits of each pass (B, passes, h, w)."""
        flipped = np.ascontiguousarray(batch[..., ::-1]) if "hflip" in tta else None
        if self.coarse:
            passes = [run(batch)] + ([run(flipped)[..., ::-1]] if flipped is not None else [])
            return np.concatenate(passes, axis=1).astype(np.float32, copy=False)
        probs = sigmoid(run(batch))
        if flipped is not None:
            probs = (probs + sigmoid(run(flipped))[..., ::-1]) / np.float32(2)
        return probs

    def probability_map(self, scores: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """One image's scores (1, C, h, w) -> float32 (H, W) in [0, 1]."""
        if self.name in ("minet", "birefnet-card"):
            return self.to_mask(scores, size).astype(np.float32) / np.float32(255.0)
        if self.name == "birefnet":
            return resize_corners(scores[0, 0].astype(np.float32), size)
        if self.coarse:
            passes = [sigmoid(resize_linear(p, size)) for p in scores[0].astype(np.float32)]
            return np.mean(passes, axis=0, dtype=np.float32)
        return resize_linear(scores[0, 0].astype(np.float32), size)

    def to_mask(self, scores: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """One image's scores (1, C, h, w) -> its uint8 mask (H, W), as the pipeline's."""
        if self.name in ("minet", "birefnet-card"):
            from PIL import Image

            at_input = (scores[0, 0] * np.float32(255.0)).astype(np.uint8)  # truncation
            how = Image.NEAREST if self.name == "minet" else Image.BICUBIC
            return np.asarray(Image.fromarray(at_input).resize((size[1], size[0]), how))
        prob = self.probability_map(scores, size) * np.float32(255.0)
        if self.name == "birefnet":
            return prob.astype(np.uint8)
        return np.clip(np.round(prob), 0, 255).astype(np.uint8)
