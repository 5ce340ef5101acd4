"""Boundary metrics of the high-resolution and DIS papers, as BiRefNet's evaluation computes them.

* Boundary IoU (Cheng et al., CVPR 2021): the IoU of the prediction's and the GT's boundary
  bands. The band of a map is the map minus its grey erosion by a square of
  ``round(0.02 * diagonal)`` pixels (at least 1; the image is zero-padded by one pixel, so a
  mask cut by the border has a boundary there). The prediction's band keeps its grey levels and
  is thresholded at the 256 levels (255 first): a curve per image, averaged over images;
  ``maxBIoU`` / ``meanBIoU`` are its max and mean.
* Mean boundary accuracy (mBA, CascadePSP): the pixel accuracy of ``pred > 128`` inside the
  GT's morphological gradient with disks of five radii from 1 to (h + w) / 300, averaged. It is
  NaN for an image whose GT has no boundary (empty or full), as in BiRefNet, and so is the mean.
"""

from __future__ import annotations

import cv2
import numpy as np

BOUNDARY_RATIO = 0.02  # BiRefNet's BIoUMeasure dilation_ratio
SQUARE = np.ones((3, 3), np.uint8)


def boundary_band(mask: np.ndarray) -> np.ndarray:
    """A uint8 map minus its erosion (see the module docstring): grey levels kept."""
    h, w = mask.shape
    steps = max(1, int(round(BOUNDARY_RATIO * np.sqrt(h ** 2 + w ** 2))))
    padded = cv2.copyMakeBorder(mask, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    eroded = cv2.erode(padded, SQUARE, iterations=steps)[1:h + 1, 1:w + 1]
    return mask - eroded


def boundary_iou_curve(levels: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """One image's boundary-IoU curve (256 thresholds, 255 first) from the truncated
    normalised prediction ``levels`` and the binary GT."""
    pred_band = boundary_band(levels)
    gt_band = boundary_band(fg.astype(np.uint8) * 255) > 128
    tp = np.cumsum(np.bincount(pred_band[gt_band], minlength=256)[::-1])
    fp = np.cumsum(np.bincount(pred_band[~gt_band], minlength=256)[::-1])
    return tp / (max(np.count_nonzero(gt_band), 1) + fp)


def boundary_accuracy(pred: np.ndarray, gt: np.ndarray) -> float:
    """One image's mean boundary accuracy from the raw uint8 prediction and GT."""
    pred_fg, gt_fg = pred > 128, (gt > 128).astype(np.uint8)
    h, w = gt.shape
    max_radius = (w + h) / 300
    accuracies = []
    for step in range(5):
        radius = 1 + int((max_radius - 1) / 5 * step)
        disk = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
        band = cv2.morphologyEx(gt_fg, cv2.MORPH_GRADIENT, disk) > 0
        total = np.count_nonzero(band)
        right = np.count_nonzero(pred_fg[band] == gt_fg[band].astype(bool))
        accuracies.append(np.float64(right) / total if total else np.float64("nan"))
    return float(sum(accuracies) / 5)
