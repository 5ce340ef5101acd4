"""The Deep Image Matting benchmark's metrics rebuilt from their published definition, as the
tests' oracle: Adobe's MATLAB evaluate.m as mmagic 1.2.0 ports it (mmagic/evaluation/metrics/
sad.py, matting_mse.py, gradient_error.py, connectivity_error.py; functional/gaussian_funcs.py),
written here from the formulas, pixel by pixel where the formula is, with SciPy's correlate
and label instead of OpenCV: nothing of sodkit.metrics.matting is used. MAD is P3M-10k's mean
absolute difference. Units as sodkit reports them (SAD, Grad, Conn / 1000; MSE, MAD x 1000)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage


def _kernel(sigma: float = 1.4, epsilon: float = 1e-2) -> np.ndarray:
    half = np.ceil(sigma * np.sqrt(-2 * np.log(np.sqrt(2 * np.pi) * sigma * epsilon)))
    size = int(2 * half + 1)

    def gauss(x: float) -> float:
        return np.exp(-x ** 2 / (2 * sigma ** 2)) / (sigma * np.sqrt(2 * np.pi))

    kernel = np.zeros((size, size))
    for i in range(size):
        for j in range(size):
            kernel[i, j] = gauss(i - half) * (-(j - half) * gauss(j - half) / sigma ** 2)
    return kernel / np.sqrt((kernel ** 2).sum())


def _gradient(alpha: np.ndarray) -> np.ndarray:
    low, high = alpha.min(), alpha.max()
    normed = (alpha - low) / (high - low) if high > low else np.zeros_like(alpha)
    kx = _kernel()
    gx = ndimage.correlate(normed, kx, mode="nearest")
    gy = ndimage.correlate(normed, kx.T, mode="nearest")
    return np.sqrt(gx ** 2 + gy ** 2)


def _connectivity_phi(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    steps = np.arange(0, 1 + 0.1, 0.1)
    round_down = -np.ones_like(gt)
    for i in range(1, len(steps)):
        both = (gt >= steps[i]) & (pred >= steps[i])
        labels, count = ndimage.label(both)  # 4-connected (the default cross)
        omega = np.zeros(gt.shape, bool)
        if count:
            sizes = np.bincount(labels.ravel())[1:]
            omega = labels == 1 + int(np.argmax(sizes))
        round_down[(round_down == -1) & ~omega] = steps[i - 1]
    round_down[round_down == -1] = 1
    phis = []
    for alpha in (pred, gt):
        diff = alpha - round_down
        phis.append(1 - diff * (diff >= 0.15))
    return phis[0], phis[1]


def oracle(pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray | None = None) -> dict:
    """SAD, MattingMSE, MAD, Grad, Conn of one uint8 pair (and trimap)."""
    pred = pred.astype(np.float64)
    if trimap is None:
        region = np.ones(gt.shape, bool)
    else:
        region = trimap == 128
        pred[trimap == 0] = 0
        pred[trimap == 255] = 255
    p, g = pred / 255.0, gt.astype(np.float64) / 255.0
    count = region.sum()
    phi_p, phi_g = _connectivity_phi(p, g)
    return {"SAD": np.abs(p - g)[region].sum() / 1000,
            "MattingMSE": ((p - g) ** 2)[region].sum() / count * 1000,
            "MAD": np.abs(p - g)[region].sum() / count * 1000,
            "Grad": ((_gradient(p) - _gradient(g)) ** 2)[region].sum() / 1000,
            "Conn": np.abs(phi_p - phi_g)[region].sum() / 1000}


def strands(size: int = 96, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A GT matte with hair-like strands (1-2 px, soft), a semi-transparent veil, a solid body,
    and a prediction that blurs, shifts and drops some of it."""
    import cv2

    rng = np.random.default_rng(seed)
    gt = np.zeros((size, size), np.float32)
    cv2.circle(gt, (size // 2, size // 2), size // 4, 1.0, -1)
    for _ in range(12):  # strands leaving the body, anti-aliased, partly transparent
        angle = rng.uniform(0, 2 * np.pi)
        length = rng.uniform(0.3, 0.5) * size
        end = (int(size / 2 + length * np.cos(angle)), int(size / 2 + length * np.sin(angle)))
        layer = np.zeros_like(gt)
        cv2.line(layer, (size // 2, size // 2), end, float(rng.uniform(0.4, 1.0)),
                 int(rng.integers(1, 3)), cv2.LINE_AA)
        gt = np.maximum(gt, layer)
    gt[: size // 5, : size // 3] = 0.45  # a veil (glass, smoke)
    pred = cv2.GaussianBlur(gt, (5, 5), 1.2)
    pred = np.roll(pred, 1, axis=1) * rng.uniform(0.85, 1.0, pred.shape).astype(np.float32)
    return (np.round(np.clip(pred, 0, 1) * 255).astype(np.uint8),
            np.round(np.clip(gt, 0, 1) * 255).astype(np.uint8))


def trimap_of(gt: np.ndarray, width: int = 5) -> np.ndarray:
    """The usual generated trimap: known where the GT is 0 or 255 after a dilation / erosion
    by ``width`` pixels, unknown (128) between."""
    import cv2

    kernel = np.ones((2 * width + 1, 2 * width + 1), np.uint8)
    fg = cv2.erode((gt == 255).astype(np.uint8), kernel)
    unknown = cv2.dilate((gt > 0).astype(np.uint8), kernel) & ~fg.astype(bool)
    trimap = np.where(fg > 0, 255, 0).astype(np.uint8)
    trimap[unknown.astype(bool)] = 128
    return trimap
