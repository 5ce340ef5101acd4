"""The torch backend (used for CUDA tensors) counts exactly what the numpy backend counts.

The torch code runs here on CPU tensors, which exercises it without a GPU; on a machine with
CUDA the same comparison also runs on the device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sodkit.metrics import SODMetrics
from sodkit.metrics.histogram import centroids, joint_histograms
from sodkit.metrics.records import measure_batch
from sodkit.metrics.testing import realistic_pairs

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    pairs = realistic_pairs(6, 37, 53, seed=9)
    gt = np.stack([g for _, g in pairs])
    gt[0] = 0  # an empty GT
    gt[1, -1, -1] = 255
    return np.stack([p for p, _ in pairs]), gt


@pytest.mark.parametrize("device", DEVICES)
def test_histograms_agree(batch, device):
    pred, gt = batch
    fg = gt > 128
    split = centroids(fg)
    fg_t = torch.from_numpy(fg).to(device)
    split_t = centroids(fg_t)
    np.testing.assert_array_equal(split[0], split_t[0])
    np.testing.assert_array_equal(split[1], split_t[1])
    expected = joint_histograms(pred, fg, *split)
    found = joint_histograms(torch.from_numpy(pred).to(device), fg_t, *split_t)
    np.testing.assert_array_equal(found, expected)
    assert expected.sum() == pred.size


@pytest.mark.parametrize("device", DEVICES)
def test_records_agree(batch, device):
    pred, gt = batch
    expected = measure_batch(pred, gt)
    found = measure_batch(torch.from_numpy(pred).to(device), torch.from_numpy(gt).to(device))
    for name in ("hist", "adaptive", "scalars"):
        np.testing.assert_array_equal(getattr(found, name), getattr(expected, name))


def test_update_accepts_tensors_and_arrays_alike(batch):
    pred, gt = batch
    a, b = SODMetrics(), SODMetrics()
    a.update(pred, gt)
    b.update(torch.from_numpy(pred), torch.from_numpy(gt))
    result_a, result_b = a.compute(), b.compute()
    for key in result_a:
        np.testing.assert_array_equal(result_a[key], result_b[key], err_msg=key)


def test_opencv_histograms_equal_bincount(batch, monkeypatch):
    """CPU histograms come from cv2.calcHist below 2^24 pixels, from np.bincount above (beyond
    calcHist's exact float32 counts): both must count the same, including empty quadrants."""
    from sodkit.metrics import histogram

    pred, gt = batch
    fg = gt > 128
    split = centroids(fg)
    found = joint_histograms(pred, fg, *split)
    monkeypatch.setattr(histogram, "OPENCV_MAX_PIXELS", 0)
    expected = joint_histograms(pred, fg, *split)
    np.testing.assert_array_equal(found, expected)
    # the GT centroid on the last row / column leaves the bottom / right quadrants empty
    edge = np.zeros_like(fg)
    edge[:, -1, -1] = True
    np.testing.assert_array_equal(joint_histograms(pred, edge, *centroids(edge)),
                                  histogram._halves_numpy(pred, edge, *centroids(edge))
                                  .reshape(len(pred), 4, 256, 2))


def test_centroids_match_a_plain_numpy_mean(batch):
    _, gt = batch
    fg = gt > 128
    split_row, split_col = centroids(fg)
    for image, row, col in zip(fg, split_row, split_col, strict=True):
        if image.any():
            ys, xs = np.nonzero(image)
            assert (row, col) == (np.round(ys.mean()) + 1, np.round(xs.mean()) + 1)
