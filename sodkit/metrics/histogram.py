"""Joint histograms: the sufficient statistics of every metric except weighted F.

MAE, the F-measure / precision-recall / E-measure curves, every adaptive metric and the
S-measure depend on an image only through how many pixels take each (uint8 prediction level,
GT bit) pair and, for the S-measure's region term, in which quadrant around the GT centroid
they lie. A (B, 4 quadrants, 256 levels, 2 GT bits) histogram replaces the reference's dozen
full-image float64 passes per image.

Two backends compute the same integers: torch for CUDA tensors (``bincount`` on the device) and
OpenCV for CPU data. On CPU, torch's intra-op threads turn these ~20 small ops into barrier
waits whenever another process holds a core (measured here: 10x slower than single-threaded).
OpenCV's ``calcHist`` counts a 320x320 image's quadrants in ~0.4 ms where the numpy key and
``bincount`` took ~0.55 ms, and it releases the GIL, which ``np.bincount`` holds for its whole
run: the weighted F-measure's worker thread, which needs the GIL between its OpenCV calls,
stalled meanwhile (with 2 threads, OpenCV's histograms made the whole 5% faster). numpy's
``bincount`` remains for images of 2^24 pixels or more, beyond calcHist's exact float32 counts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import cv2
import numpy as np

from .prepare import is_tensor
from .workspace import scratch

if TYPE_CHECKING:
    import torch

Array = Union[np.ndarray, "torch.Tensor"]
# Images measured with cv2.calcHist: its float32 counts are exact integers below 2^24.
OPENCV_MAX_PIXELS = 1 << 24


def centroids(fg: Array) -> tuple[np.ndarray, np.ndarray]:
    """The S-measure's split point (1-based, as in the MATLAB code) per image.

    The reference takes ``round(mean(row)), round(mean(col))`` of the GT pixels, plus one, with
    numpy's round-half-to-even; integer sums are exact, so the float64 quotient and the rounding
    are too.

    Args:
        fg: (B, H, W) bool GT, numpy or torch.

    Returns:
        ``split_row`` and ``split_col``, (B,) int64; for an empty GT the image centre (the
        S-measure never reads it then).
    """
    batch, height, width = fg.shape
    if is_tensor(fg):
        import torch

        as_bytes = fg.view(torch.uint8)
        per_row = as_bytes.sum(dim=2, dtype=torch.int32).cpu().numpy()
        per_col = as_bytes.sum(dim=1, dtype=torch.int32).cpu().numpy()
    else:  # cv2.reduce: 5x faster than numpy's uint8 -> int32 sums here
        as_bytes = fg.view(np.uint8)
        per_row = cv2.reduce(as_bytes.reshape(batch * height, width), 1, cv2.REDUCE_SUM,
                             dtype=cv2.CV_32S).reshape(batch, height)
        per_col = np.concatenate([cv2.reduce(image, 0, cv2.REDUCE_SUM, dtype=cv2.CV_32S)
                                  for image in as_bytes]) if batch else np.zeros((0, width))
    per_row, per_col = per_row.astype(np.int64), per_col.astype(np.int64)
    count = per_row.sum(axis=1)
    safe = np.maximum(count, 1)
    row_mean = per_row @ np.arange(height) / safe
    col_mean = per_col @ np.arange(width) / safe
    split_row = np.where(count > 0, np.round(row_mean), np.round(height / 2)) + 1
    split_col = np.where(count > 0, np.round(col_mean), np.round(width / 2)) + 1
    return split_row.astype(np.int64), split_col.astype(np.int64)


def joint_histograms(
    pred: Array, fg: Array, split_row: np.ndarray, split_col: np.ndarray
) -> np.ndarray:
    """Pixel counts per (image, quadrant, prediction level, GT bit).

    Quadrants are numbered top-left 0, top-right 1, bottom-left 2, bottom-right 3; "top" is
    ``row < split_row`` and "left" is ``col < split_col`` (the reference's ``[0:cy, 0:cx]``).
    The key of a pixel is ``512 * right + 2 * level + bit``; top and bottom rows are contiguous
    memory, so each half is one ``bincount`` instead of a fourth key term.

    Args:
        pred: (B, H, W) uint8, numpy or torch, or a list of (H, W) numpy arrays.
        fg: (B, H, W) bool GT, same kind and device as ``pred``.
        split_row, split_col: (B,) int split points from :func:`centroids`.

    Returns:
        (B, 4, 256, 2) int64 numpy array.
    """
    batch = len(pred)
    if is_tensor(pred):
        halves = _halves_torch(pred, fg, split_row, split_col)
    elif pred[0].size < OPENCV_MAX_PIXELS:
        return _quadrants_opencv(pred, fg, split_row, split_col)
    else:
        halves = _halves_numpy(pred, fg, split_row, split_col)
    return halves.reshape(batch, 2, 2, 256, 2).reshape(batch, 4, 256, 2)


def _quadrants_opencv(
    pred: np.ndarray, fg: np.ndarray, split_row: np.ndarray, split_col: np.ndarray
) -> np.ndarray:
    """:func:`joint_histograms` with ``cv2.calcHist``: per quadrant, the levels of all pixels
    and of the GT's pixels (a mask); the background's are their difference.

    Two 1-D histograms beat one 2-D (level, bit) histogram, whose OpenCV loop goes through a
    lookup table for every pixel: 0.4 ms per 320x320 image against 0.55-0.65 ms. (With IPP on,
    calcHist slowed down 3x after a few hundred calls here: one more reason it is off while
    measuring, see ``workspace``.)
    """
    out = np.empty((len(pred), 4, 2, 256), np.float32)
    bits = fg.view(np.uint8)
    for b, (image, split_r, split_c) in enumerate(zip(pred, split_row.tolist(),
                                                      split_col.tolist(), strict=True)):
        halves = (slice(0, split_r), slice(split_r, None))
        sides = (slice(0, split_c), slice(split_c, None))
        for quadrant, (rows, cols) in enumerate((r, c) for r in halves for c in sides):
            block = image[rows, cols]  # an empty block counts nothing
            cv2.calcHist([block], [0], None, [256], [0, 256], hist=out[b, quadrant, 0])
            cv2.calcHist([block], [0], bits[b, rows, cols], [256], [0, 256],
                         hist=out[b, quadrant, 1])
    out[:, :, 0] -= out[:, :, 1]
    return out.transpose(0, 1, 3, 2).astype(np.int64)


def _halves_numpy(
    pred: np.ndarray, fg: np.ndarray, split_row: np.ndarray, split_col: np.ndarray
) -> np.ndarray:
    pred = np.asarray(pred)  # a list of images: stacked (images this large are rare)
    columns = np.arange(pred.shape[2])[None, :]
    right = (columns >= split_col[:, None]).astype(np.int16) * 512
    key = np.multiply(pred, 2, out=scratch("key", pred.shape, np.int16), dtype=np.int16)
    key += fg
    key += right[:, None, :]
    out = np.empty((len(pred), 2, 1024), np.int64)
    for b, (image, split) in enumerate(zip(key, split_row, strict=True)):
        out[b, 0] = np.bincount(image[:split].ravel(), minlength=1024)
        out[b, 1] = np.bincount(image[split:].ravel(), minlength=1024)
    return out


def _halves_torch(
    pred: torch.Tensor, fg: torch.Tensor, split_row: np.ndarray, split_col: np.ndarray
) -> np.ndarray:
    import torch

    device = pred.device
    columns = torch.arange(pred.shape[2], device=device)[None, :]
    right = (columns >= torch.as_tensor(split_col, device=device)[:, None]).to(torch.int16) * 512
    key = torch.add(fg.to(torch.int16) + right[:, None, :], pred.to(torch.int16), alpha=2)
    halves = []
    for image, split in zip(key, split_row.tolist(), strict=True):
        halves.append(torch.bincount(image[:split].reshape(-1), minlength=1024))
        halves.append(torch.bincount(image[split:].reshape(-1), minlength=1024))
    return torch.stack(halves).cpu().numpy().astype(np.int64).reshape(len(pred), 2, 1024)
