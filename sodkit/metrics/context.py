"""Context-measure (CM, Wang et al., 2025), as PySODMetrics 1.6's ``ContextMeasure`` computes it.

A Gaussian kernel shaped like the GT's pixel distribution (its covariance scaled so that the
total standard deviation is ``alpha`` = 6 pixels) spreads the GT and the prediction over their
context. Forward inference: how much of the predicted mass lies where the spread GT is
(weighted by the prediction); reverse deduction: how well the spread prediction covers each GT
pixel (``e / (e - 1) * (1 - exp(-spread))``). CM is their F-measure with beta^2 = 1. The same
OpenCV filters (and dtypes) as the reference, hence the same numbers.
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from .prepare import EPS

ALPHA = 6.0
BETA2 = 1.0
GAIN = math.e / (math.e - 1)


def context_kernel(fg: np.ndarray) -> np.ndarray:
    """The normalised Gaussian kernel of the GT's covariance (rows first), of half-size three
    standard deviations; a 3 x 3 kernel of variance 0.25 for a GT of at most one pixel."""
    points = np.argwhere(fg)
    if len(points) <= 1:
        cov, half = np.diag([0.25, 0.25]), (1, 1)
    else:
        cov = np.cov(points, rowvar=False)
        cov[0, 0] = cov[0, 0] or EPS  # a line: keep the matrix invertible
        cov[1, 1] = cov[1, 1] or EPS
        total = np.sqrt(cov[0, 0] + cov[1, 1])
        half = (round(3 * (ALPHA * np.sqrt(cov[0, 0]) / total)),
                round(3 * (ALPHA * np.sqrt(cov[1, 1]) / total)))
        cov = ALPHA ** 2 * cov / total ** 2
    rows, cols = np.meshgrid(np.arange(-half[0], half[0] + 1), np.arange(-half[1], half[1] + 1),
                             indexing="ij")
    offsets = np.stack([rows, cols], axis=-1)
    quadratic = np.einsum("...i,ij,...j->...", offsets, np.linalg.inv(cov), offsets)
    kernel = np.exp(-0.5 * quadratic) / (2 * np.pi * np.sqrt(np.linalg.det(cov)))
    return kernel / np.sum(kernel)


def context_measure(norm: np.ndarray, fg: np.ndarray, degree: np.ndarray | None = None,
                    beta2: float = BETA2) -> float:
    """One image's CM from the normalised prediction and the binary GT; with a camouflage
    ``degree`` map (and beta^2 1.2), the reverse deduction's weights are GT + degree: CCM."""
    gt = fg.astype(np.float64)
    kernel = context_kernel(fg)
    relevance = cv2.filter2D(gt.astype(np.float32), cv2.CV_32F, kernel)
    forward = (norm > 0).astype(int) * relevance
    precision = np.sum(forward * norm) / (np.sum(norm) + EPS)
    coverage = GAIN * gt * (1 - np.exp(-1 * cv2.filter2D(norm, -1, kernel)))
    degree = np.zeros_like(gt) if degree is None else degree
    recall = np.sum(coverage * (gt + degree)) / (np.sum(gt) + np.sum(degree) + EPS)
    return float((1 + beta2) * precision * recall / (beta2 * precision + recall + EPS))
