"""Synthetic prediction / ground-truth pairs that look like real SOD data.

Tests and benchmarks need pairs whose statistics resemble a network's output on a real dataset:
binary GT objects with a few anti-aliased edge values, and predictions that are blurred,
shifted, noisy, partly saturated (many exact 0s and 255s) and sometimes wrong. Uniform noise
would exercise none of the cases that matter (ties near object boundaries, large zero regions).
"""

from __future__ import annotations

import cv2
import numpy as np


def _draw_objects(rng: np.random.Generator, h: int, w: int, scale: int = 4) -> np.ndarray:
    """1-3 filled ellipses / polygons drawn at ``scale`` x resolution, then area-downsampled."""
    big = np.zeros((h * scale, w * scale), np.uint8)
    for _ in range(int(rng.integers(1, 4))):
        cx, cy = rng.uniform(0.15, 0.85) * w * scale, rng.uniform(0.15, 0.85) * h * scale
        if rng.random() < 0.5:
            axes = (int(rng.uniform(0.05, 0.3) * w * scale),
                    int(rng.uniform(0.05, 0.3) * h * scale))
            angle = float(rng.uniform(0, 180))
            cv2.ellipse(big, (int(cx), int(cy)), axes, angle, 0, 360, 255, -1)
        else:
            n = int(rng.integers(3, 9))
            angles = np.sort(rng.uniform(0, 2 * np.pi, n))
            radius = rng.uniform(0.05, 0.3, n) * min(h, w) * scale
            pts = np.stack([cx + radius * np.cos(angles), cy + radius * np.sin(angles)], 1)
            cv2.fillPoly(big, [pts.astype(np.int32)], 255)
    return cv2.resize(big, (w, h), interpolation=cv2.INTER_AREA)


def realistic_pair(
    rng: np.random.Generator, height: int = 320, width: int = 320
) -> tuple[np.ndarray, np.ndarray]:
    """One (pred, gt) pair of uint8 (H, W) arrays resembling a SOD network's output.

    The GT is mostly 0/255 with soft edges; the prediction is the GT blurred, shifted, with
    false-positive blobs, noise and a sigmoid-like contrast, so that it saturates to exact 0 / 255
    over large areas as real predictions do.
    """
    gt = _draw_objects(rng, height, width)
    soft = gt.astype(np.float32) / 255.0
    dx, dy = rng.integers(-6, 7, 2)
    soft = np.roll(soft, (int(dy), int(dx)), axis=(0, 1))
    if rng.random() < 0.5:
        soft = np.maximum(soft, 0.6 * _draw_objects(rng, height, width).astype(np.float32) / 255)
    sigma = float(rng.uniform(1.0, 6.0))
    soft = cv2.GaussianBlur(soft, (0, 0), sigma)
    soft += rng.normal(0.0, rng.uniform(0.0, 0.15), soft.shape).astype(np.float32)
    gain = rng.uniform(6.0, 20.0)
    logits = gain * (soft - rng.uniform(0.35, 0.65))
    pred = 255.0 / (1.0 + np.exp(-logits))
    return np.clip(pred, 0, 255).astype(np.uint8), gt


def realistic_pairs(
    n: int, height: int = 320, width: int = 320, seed: int = 0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` pairs from :func:`realistic_pair` with one seeded generator (deterministic)."""
    rng = np.random.default_rng(seed)
    return [realistic_pair(rng, height, width) for _ in range(n)]
