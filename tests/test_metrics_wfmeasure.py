"""The weighted F-measure's shortcuts against SciPy and PySODMetrics: exact squared distances from
OpenCV, SciPy's choice among equally near GT pixels, and the score on masks full of ties."""

from __future__ import annotations

import warnings

import cv2
import numpy as np
import py_sod_metrics as psm
import pytest
from scipy.ndimage import distance_transform_edt

from sodkit.metrics.wfmeasure import (
    _first_hit,
    _squared_distances,
    gaussian_kernel,
    gaussian_kernel_1d,
    nearest_gt,
    weighted_fmeasure,
    weighted_fmeasure_uint8,
)
from sodkit.metrics.workspace import opencv_single_threaded


def random_mask(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    return rng.random((height, width)) < rng.uniform(0.02, 0.5)


def test_nearest_gt_pixel_breaks_ties_like_scipy():
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(60):
        fg = random_mask(rng, *(int(v) for v in rng.integers(3, 25, 2)))
        if not fg.any():
            continue
        distance, (iy, ix) = distance_transform_edt(~fg, return_indices=True)
        squared = np.rint(distance**2).astype(np.int64)
        ys, xs = np.nonzero(~fg & (squared <= 18))
        padded = np.pad(fg, 4)
        width = padded.shape[1]
        found = nearest_gt(padded, (ys + 4) * width + xs + 4, squared[ys, xs])
        expected = (iy[ys, xs] + 4) * width + ix[ys, xs] + 4
        np.testing.assert_array_equal(found, expected)
        checked += len(ys)
    assert checked > 3000


@pytest.mark.parametrize("ipp", [False, True])
@pytest.mark.parametrize("shape,points", [((40, 60), 5), ((1, 1500), 1), ((700, 9), 1),
                                          ((890, 2), 1), ((2100, 2), 1), ((512, 512), 0)])
def test_squared_distances_are_exact(shape, points, ipp):
    """OpenCV's route (k < 2^19) and SciPy's, including narrow images where IPP's EDT would
    miss by one from k = 886^2 + 1 on, with IPP off (as when measuring) and on (a caller's
    default)."""
    rng = np.random.default_rng(1)
    fg = np.zeros(shape, bool)
    fg.flat[rng.choice(fg.size, points, replace=False)] = True
    fg.flat[0] = True
    with opencv_single_threaded():
        cv2.ipp.setUseIPP(ipp)
        squared, top = _squared_distances((~fg).view(np.uint8))
    expected = np.rint(distance_transform_edt(~fg) ** 2).astype(np.int64)
    np.testing.assert_array_equal(squared, expected)
    assert top > expected.max()


def test_squared_distances_are_exact_on_random_masks():
    """OpenCV's own EDT (IPP off) against SciPy's on sparse masks: large distances, many ties."""
    rng = np.random.default_rng(4)
    with opencv_single_threaded():
        for _ in range(40):
            shape = tuple(int(v) for v in rng.integers(1, 400, 2))
            fg = rng.random(shape) < rng.choice([1e-4, 1e-3, 1e-2, 0.2])
            fg.flat[rng.integers(fg.size)] = True
            squared, _ = _squared_distances((~fg).view(np.uint8))
            expected = np.rint(distance_transform_edt(~fg) ** 2)
            np.testing.assert_array_equal(squared, expected)


def test_first_hit_is_argmax():
    rng = np.random.default_rng(3)
    hits = (rng.random((500, 8)) < 0.3).astype(np.uint8)
    hits[np.arange(500), rng.integers(0, 8, 500)] = 1  # every row has one
    np.testing.assert_array_equal(_first_hit(hits), hits.argmax(axis=1))


def tie_heavy_masks(rng: np.random.Generator) -> list[np.ndarray]:
    checker = (np.indices((24, 31)).sum(axis=0) % 2 == 0)
    diagonal = np.eye(29, 33, dtype=bool) | np.eye(29, 33, k=9, dtype=bool)
    ring = np.zeros((35, 35), bool)
    yy, xx = np.indices(ring.shape)
    ring[((yy - 17) ** 2 + (xx - 17) ** 2 > 60) & ((yy - 17) ** 2 + (xx - 17) ** 2 < 140)] = True
    border = np.zeros((20, 26), bool)
    border[:, :3] = border[-2:, :] = True
    sparse = rng.random((40, 37)) < 0.03
    return [checker, diagonal, ring, border, sparse, random_mask(rng, 33, 47), ~sparse]


def test_weighted_fmeasure_on_tie_heavy_masks():
    rng = np.random.default_rng(2)
    for fg in tie_heavy_masks(rng):
        for _ in range(3):
            pred = rng.integers(0, 256, fg.shape, dtype=np.uint8)
            gt = np.where(fg, 255, 0).astype(np.uint8)
            reference = psm.WeightedFmeasure()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reference.step(pred, gt)
            expected = reference.get_results()["wfm"]
            assert abs(weighted_fmeasure_uint8(pred, fg) - expected) <= 1e-12


def test_weighted_fmeasure_degenerate_gts():
    pred = np.linspace(0, 1, 35).reshape(5, 7)
    assert weighted_fmeasure(pred, np.zeros((5, 7), bool)) == 0.0
    full = weighted_fmeasure(pred, np.ones((5, 7), bool))
    reference = psm.WeightedFmeasure()
    reference.step((pred * 255).astype(np.uint8), np.full((5, 7), 255, np.uint8))
    uint8_full = weighted_fmeasure_uint8((pred * 255).astype(np.uint8), np.ones((5, 7), bool))
    assert abs(uint8_full - reference.get_results()["wfm"]) <= 1e-12
    assert 0 < full <= 1


def test_separable_kernel_factors_the_reference_kernel():
    reference = psm.WeightedFmeasure().matlab_style_gauss2D((7, 7), sigma=5)
    np.testing.assert_array_equal(gaussian_kernel(), reference)
    one_d = gaussian_kernel_1d()
    assert np.abs(np.outer(one_d, one_d) - reference).max() < 1e-17


def reference_wfmeasure(pred: np.ndarray, gt: np.ndarray) -> float:
    reference = psm.WeightedFmeasure()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference.step(pred, gt)
    return reference.get_results()["wfm"]


def test_predictions_zero_outside_a_box_are_measured_on_the_box():
    """Only the box of the GT (grown by 3) and the non-zero prediction is measured: GTs at the
    image border and at the box's edge, predictions that are 0 except in a corner, constant
    and empty predictions."""
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(40):
        h, w = (int(v) for v in rng.integers(12, 60, 2))
        gt = np.zeros((h, w), np.uint8)
        y, x = int(rng.integers(0, h - 3)), int(rng.integers(0, w - 3))
        gt[y:y + int(rng.integers(1, 8)), x:x + int(rng.integers(1, 8))] = 255
        pred = np.zeros((h, w), np.uint8)
        py, px = int(rng.integers(0, h)), int(rng.integers(0, w))
        pred[py:py + int(rng.integers(1, 20)), px:px + int(rng.integers(1, 20))] = rng.integers(
            0, 256, dtype=np.uint8)
        pred[rng.random((h, w)) < 0.05] = 0
        cases.append((pred, gt))
    gt = np.zeros((30, 40), np.uint8)
    gt[0:4, 36:40] = 255  # in a corner
    cases += [(np.zeros_like(gt), gt), (np.full_like(gt, 7), gt), (gt.copy(), gt)]
    with opencv_single_threaded():
        for pred, gt in cases:
            expected = reference_wfmeasure(pred, gt)
            assert abs(weighted_fmeasure_uint8(pred, gt > 128) - expected) <= 1e-12
