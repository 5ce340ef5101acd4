"""Every metric and curve of SODMetrics against PySODMetrics (the oracle), on realistic pairs and
on the edge cases where implementations usually drift: empty and full GTs, constant predictions,
one-pixel objects, odd sizes, soft GTs."""

from __future__ import annotations

import numpy as np
import pytest

from sodkit.metrics import CURVE_KEYS, METRIC_KEYS, SODMetrics, scalar_metrics
from sodkit.metrics.testing import realistic_pair, realistic_pairs
from tests.metrics_fixtures import assert_matches_reference, reference_metrics, soft_gt


def ours(pairs, **kwargs) -> dict:
    metrics = SODMetrics(**kwargs)
    for pred, gt in pairs:
        metrics.update(pred, gt)
    return metrics.compute()


def check(pairs, tol: float = 1e-6) -> None:
    """Per image and over the whole list, so that one image's error cannot hide in a mean."""
    for pair in pairs:
        assert_matches_reference(ours([pair]), reference_metrics([pair]), tol)
    assert_matches_reference(ours(pairs), reference_metrics(pairs), tol)


def test_keys_and_types():
    result = ours(realistic_pairs(2, 40, 50))
    assert list(result) == list(METRIC_KEYS) + list(CURVE_KEYS)
    assert all(type(result[k]) is float for k in METRIC_KEYS)
    for key in CURVE_KEYS:
        assert result[key].dtype == np.float64 and result[key].shape == (256,)
    assert list(scalar_metrics(result)) == list(METRIC_KEYS)


def test_realistic_pairs_of_mixed_sizes():
    rng = np.random.default_rng(1)
    sizes = [(96, 128), (97, 61), (128, 96), (64, 64), (33, 150), (96, 128)]
    pairs = [realistic_pair(rng, h, w) for h, w in sizes for _ in range(3)]
    check(pairs, tol=1e-12)


def test_realistic_pairs_batched_in_threads_match_too():
    pairs = realistic_pairs(10, 80, 72, seed=5)
    assert_matches_reference(ours(pairs, threads=2, chunk_pixels=80 * 72 * 3),
                             reference_metrics(pairs), tol=1e-12)


def test_empty_and_full_gts():
    rng = np.random.default_rng(2)
    pred, _ = realistic_pair(rng, 48, 64)
    zeros, full = np.zeros((48, 64), np.uint8), np.full((48, 64), 255, np.uint8)
    check([(pred, zeros), (pred, full), (zeros, zeros), (full, full), (zeros, full),
           (full, zeros)])


@pytest.mark.parametrize("value", [0, 1, 128, 200, 255])
def test_constant_predictions(value):
    rng = np.random.default_rng(value)
    gts = [realistic_pair(rng, 40, 56)[1] for _ in range(3)]
    gts.append(np.pad(np.full((9, 7), 255, np.uint8), ((30, 1), (40, 9))))  # object near a corner
    two = np.zeros((40, 56), np.uint8)
    two[2:9, 3:12] = two[30:38, 40:52] = 255  # two blobs: two quadrants without GT pixels
    gts.append(two)
    gts += [np.zeros((40, 56), np.uint8), np.full((40, 56), 255, np.uint8)]
    check([(np.full(gt.shape, value, np.uint8), gt) for gt in gts])


def test_one_pixel_objects_everywhere():
    """Including the last row and column, where the reference's S-measure is NaN."""
    rng = np.random.default_rng(3)
    pairs = []
    for y, x in [(0, 0), (5, 7), (10, 3), (0, 12), (10, 12), (3, 12), (10, 0)]:
        gt = np.zeros((11, 13), np.uint8)
        gt[y, x] = 255
        pairs.append((rng.integers(0, 256, (11, 13), dtype=np.uint8), gt))
        pairs.append((gt.copy(), gt))
    check(pairs)


def test_odd_tiny_and_non_square_sizes():
    rng = np.random.default_rng(4)
    pairs = []
    for h, w in [(1, 1), (1, 7), (7, 1), (2, 2), (3, 5), (17, 4), (5, 31)]:
        pred = rng.integers(0, 256, (h, w), dtype=np.uint8)
        gt = np.where(rng.random((h, w)) < 0.4, 255, 0).astype(np.uint8)
        pairs.append((pred, gt))
    check(pairs)


def test_soft_gts_and_two_level_predictions():
    rng = np.random.default_rng(5)
    pairs = []
    for _ in range(4):
        gt = soft_gt(rng, 37, 45)
        pairs.append((rng.integers(0, 256, gt.shape, dtype=np.uint8), gt))
        pairs.append((np.where(rng.random(gt.shape) < 0.5, 255, 0).astype(np.uint8), gt))
        pairs.append((rng.choice(np.array([3, 90], np.uint8), gt.shape), gt))
    check(pairs)


def test_tiny_images_with_few_levels_hit_exact_ties():
    """Few levels on few pixels make 2 * mean land on a level and constant quadrants common:
    the cases where a histogram-based mean or variance alone would take the wrong branch."""
    rng = np.random.default_rng(6)
    pairs = []
    for _ in range(150):
        h, w = (int(v) for v in rng.integers(2, 6, 2))
        levels = rng.choice(np.array([0, 51, 85, 102, 128, 170, 255], np.uint8), 3)
        pred = rng.choice(levels, (h, w))
        gt = np.where(rng.random((h, w)) < 0.5, 255, 0).astype(np.uint8)
        pairs.append((pred, gt))
    check(pairs)


@pytest.mark.parametrize("level,zeros,ones,mids",
                         [(51, 10, 1, 1), (85, 6, 1, 1), (102, 5, 1, 1), (1, 533, 1, 24)])
def test_adaptive_threshold_landing_on_a_level(level, zeros, ones, mids):
    """2 * mean equals a present level (up to rounding): ``p >= threshold`` then depends on the
    reference's exact float sum, which the engine recomputes for such images. (With 558 pixels
    and level 1, numpy's pairwise mean and a histogram mean round to different sides.)"""
    values = np.array([0] * zeros + [255] * ones + [level] * mids, np.uint8)
    assert 2 * (values / 255).mean() == pytest.approx(level / 255, abs=1e-15)
    rng = np.random.default_rng(level + zeros)
    pairs = []
    for order in (values, values[::-1], rng.permutation(values), rng.permutation(values)):
        gt = np.zeros(order.size, np.uint8)
        gt[-1] = 255
        pairs += [(order[None].copy(), gt[None]), (order[:, None].copy(), gt[:, None])]
    check(pairs)
