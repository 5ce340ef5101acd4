"""Camouflage context-measure (CCM, Wang et al., 2025), as PySODMetrics 1.6's
``CamouflageContextMeasure`` computes it: CM (beta^2 1.2) whose reverse deduction also weighs
each GT pixel by its camouflage degree, i.e. how well the surrounding background can redraw
the object.

The camouflage degree: the object is rebuilt from its surroundings (the 20-pixel band around
the GT) by replacing each 7 x 7 object patch (stride 3) with its nearest background patch in
Lab colour plus scaled position (weight 20); the CIEDE2000 similarity of the rebuilt and the
real object, ``s``, gives ``(exp(8 s) - 1) / (exp(8) - 1)`` on the GT. It needs the image
(RGB, at the GT's size), scikit-image (Lab, CIEDE2000) and scikit-learn (the nearest-neighbour
search, as the reference: its tie-breaking decides which patch is used).
"""

from __future__ import annotations

import cv2
import numpy as np

from .context import context_measure
from .prepare import EPS

PATCH, STRIDE, BAND = 7, 3, 20
GAMMA, SPATIAL, BETA2 = 8, 20.0, 1.2


def _patches(image: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-left corners and flattened pixels of the 7 x 7 windows (stride 3, the image
    reflect-padded at the bottom and right) lying wholly inside ``mask``."""
    h, w = mask.shape
    pad_h = (STRIDE - (h - PATCH) % STRIDE) % STRIDE
    pad_w = (STRIDE - (w - PATCH) % STRIDE) % STRIDE
    image = np.pad(image, ((0, pad_h), (0, pad_w), (0, 0)), mode="reflect")
    mask = np.pad(mask, ((0, pad_h), (0, pad_w)))
    windows = np.lib.stride_tricks.sliding_window_view(image, (PATCH, PATCH, 3))
    windows = windows[::STRIDE, ::STRIDE, 0].reshape(-1, PATCH * PATCH * 3)
    inside = np.lib.stride_tricks.sliding_window_view(mask, (PATCH, PATCH))[::STRIDE, ::STRIDE]
    rows, cols = np.meshgrid(np.arange(0, image.shape[0] - PATCH + 1, STRIDE),
                             np.arange(0, image.shape[1] - PATCH + 1, STRIDE), indexing="ij")
    corners = np.column_stack((rows.ravel(), cols.ravel()))
    valid = np.all(inside.reshape(-1, PATCH, PATCH) > 0, axis=(1, 2))
    return corners[valid], windows[valid]


def _nearest(bg_feat: np.ndarray, fg_feat: np.ndarray, bg_at: np.ndarray,
             fg_at: np.ndarray) -> np.ndarray:
    """For each object patch, the background patch nearest in (Lab, 20 x standardised
    position), float32 Euclidean, as scikit-learn's exact search gives it."""
    from sklearn.neighbors import NearestNeighbors

    coords = np.vstack([bg_at, fg_at]).astype(np.float64)
    scale = coords.std(axis=0)
    scaled = (coords - coords.mean(axis=0)) / np.where(scale == 0, 1.0, scale)
    bg = np.hstack([bg_feat, SPATIAL * scaled[:len(bg_at)]]).astype(np.float32)
    fg = np.hstack([fg_feat, SPATIAL * scaled[len(bg_at):]]).astype(np.float32)
    search = NearestNeighbors(n_neighbors=1, algorithm="auto", metric="euclidean").fit(bg)
    return search.kneighbors(fg)[1][:, 0]


def _rebuilt(image: np.ndarray, background: np.ndarray, fg_at: np.ndarray,
             source: np.ndarray) -> np.ndarray:
    """The object redrawn from its matched background patches (overlaps averaged)."""
    h, w = image.shape[:2]
    total = np.zeros(image.shape, np.int64)
    counts = np.zeros((h, w)) + EPS
    to = np.clip(fg_at, 0, [h - PATCH, w - PATCH])
    src = np.clip(source, 0, [h - PATCH, w - PATCH])
    for (r, c), (sr, sc) in zip(to, src, strict=True):
        total[r:r + PATCH, c:c + PATCH] += background[sr:sr + PATCH, sc:sc + PATCH]
        counts[r:r + PATCH, c:c + PATCH] += 1
    return np.round(total / counts[:, :, None]).astype(np.uint8)


def camouflage_degree(image: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """Per pixel, how well the GT object's surroundings redraw it (0 off the GT)."""
    from skimage.color import deltaE_ciede2000, rgb2lab

    mask = fg.astype(np.uint8)
    band = cv2.dilate(mask, np.ones((BAND, BAND), np.uint8)) - mask
    lab = cv2.cvtColor(image, cv2.COLOR_RGB2LAB)
    fg_at, fg_feat = _patches(lab * mask[:, :, None], mask)
    bg_at, bg_feat = _patches(lab * band[:, :, None], band)
    if len(fg_at) == 0 or len(bg_at) == 0:
        return np.zeros(fg.shape)
    source = bg_at[_nearest(bg_feat, fg_feat, bg_at, fg_at)]
    rebuilt = _rebuilt(image, band[:, :, None] * image, fg_at, source)
    difference = deltaE_ciede2000(rgb2lab(rebuilt), rgb2lab(mask[:, :, None] * image))
    similarity = 1 - np.clip(difference / 100, 0, 1)
    return (np.exp(GAMMA * similarity * mask) - 1) / (np.exp(GAMMA) - 1)


def camouflage_context_measure(norm: np.ndarray, fg: np.ndarray, image: np.ndarray) -> float:
    """One image's CCM from the normalised prediction, the binary GT and the RGB image."""
    return context_measure(norm, fg, camouflage_degree(image, fg), BETA2)
