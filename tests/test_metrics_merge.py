"""Mergeable state: shards, batches and processes give exactly (bit for bit) the single-pass
result, whatever the order the images or the shards arrive in."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from sodkit.metrics import SODMetrics
from sodkit.metrics.testing import realistic_pair


@pytest.fixture(scope="module")
def dataset() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(11)
    sizes = [(48, 64), (50, 37), (48, 64), (31, 31)]
    return [realistic_pair(rng, *sizes[i % len(sizes)]) for i in range(26)]


def single_pass(dataset) -> dict:
    metrics = SODMetrics()
    for pred, gt in dataset:
        metrics.update(pred, gt)
    return metrics.compute()


def assert_identical(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_shuffled_unequal_shards_merge_to_the_single_pass_result(dataset):
    expected = single_pass(dataset)
    rng = np.random.default_rng(0)
    for _ in range(3):
        order = rng.permutation(len(dataset))
        cuts = np.sort(rng.choice(np.arange(1, len(dataset)), 3, replace=False))
        shards = []
        for part in np.split(order, cuts):
            shard = SODMetrics(chunk_pixels=int(rng.integers(1, 20)) * 3000)
            for i in part:
                shard.update(*dataset[i], index=int(i))
            shards.append(pickle.loads(pickle.dumps(shard.state_dict())))  # as all_gather_object
        merged = SODMetrics()
        for state in (shards[i] for i in rng.permutation(len(shards))):
            part = SODMetrics()
            part.load_state_dict(state)
            merged.merge(part)
        assert len(merged) == len(dataset)
        assert_identical(merged.compute(), expected)


def test_batches_tensors_and_single_pairs_agree(dataset):
    expected = single_pass(dataset)
    batched = SODMetrics()
    for shape in sorted({p.shape for p, _ in dataset}):
        idx = [i for i, (p, _) in enumerate(dataset) if p.shape == shape]
        preds = torch.from_numpy(np.stack([dataset[i][0] for i in idx]))
        gts = torch.from_numpy(np.stack([dataset[i][1] for i in idx]))
        batched.update(preds, gts, index=idx)
    assert_identical(batched.compute(), expected)


def test_default_indices_continue_and_len_counts_pending_images(dataset):
    metrics = SODMetrics()
    metrics.update(*dataset[0])
    metrics.update(np.stack([dataset[2][0], dataset[4][0]]),
                   np.stack([dataset[2][1], dataset[4][1]]))
    assert len(metrics) == 3
    assert metrics.state_dict()["index"].tolist() == [0, 1, 2]


def test_duplicate_index_is_refused(dataset):
    a, b = SODMetrics(), SODMetrics()
    a.update(*dataset[0], index=3)
    b.update(*dataset[1], index=3)
    with pytest.raises(ValueError, match="measured twice"):
        a.merge(b).compute()


def test_bad_inputs_are_refused(dataset):
    pred, gt = dataset[0]
    metrics = SODMetrics()
    with pytest.raises(ValueError, match="resize the prediction"):
        metrics.update(pred[:-1], gt)
    with pytest.raises(TypeError, match="uint8"):
        metrics.update(pred.astype(np.float32), gt)
    with pytest.raises(ValueError, match="indices"):
        metrics.update(pred, gt, index=[1, 2])
    with pytest.raises(ValueError, match="no images"):
        metrics.compute()


def test_opencv_thread_setting_is_restored(dataset):
    import cv2

    before, ipp_before = cv2.getNumThreads(), cv2.ipp.useIPP()
    metrics = SODMetrics(threads=2, chunk_pixels=1)
    metrics.update(*dataset[0])
    assert len(metrics.compute()) > 0 and cv2.getNumThreads() == before
    assert cv2.ipp.useIPP() == ipp_before


def test_results_do_not_depend_on_threads_or_chunks(dataset):
    expected = single_pass(dataset)
    for threads, chunk_pixels in [(1, 1), (2, 5000), (3, 3000), (2, 1 << 22)]:
        metrics = SODMetrics(threads=threads, chunk_pixels=chunk_pixels)
        for pred, gt in dataset:
            metrics.update(pred, gt)
        assert_identical(metrics.compute(), expected)


def test_reset_and_load_state_while_images_are_queued(dataset):
    expected = single_pass(dataset)
    metrics = SODMetrics(threads=2)
    for pred, gt in dataset[:5]:
        metrics.update(pred, gt)
    metrics.reset()
    assert len(metrics) == 0
    for pred, gt in dataset[:5]:
        metrics.update(pred, gt)
    state = single_pass_state(dataset)
    metrics.load_state_dict(state)
    assert_identical(metrics.compute(), expected)


def single_pass_state(dataset) -> dict:
    metrics = SODMetrics()
    for pred, gt in dataset:
        metrics.update(pred, gt)
    return metrics.state_dict()


def test_a_failing_image_fails_compute(dataset, monkeypatch):
    """An error in a worker thread or in the calling thread surfaces in compute()."""
    from sodkit.metrics import parallel

    measure = parallel.weighted_fmeasure_of_pair

    def failing(pred, gt):
        if pred.shape == (31, 31):
            raise RuntimeError("boom")
        return measure(pred, gt)

    monkeypatch.setattr(parallel, "weighted_fmeasure_of_pair", failing)
    for threads in (1, 2):
        metrics = SODMetrics(threads=threads)
        for pred, gt in dataset:
            metrics.update(pred, gt)
        with pytest.raises(RuntimeError, match="boom"):
            metrics.compute()


def test_per_image_after_compute_equals_per_image_alone(dataset):
    """compute() keeps the per-image scores of its pass; they are those of a fresh pass, and an
    image added afterwards is in the next per_image()."""
    first, rest = dataset[:-1], dataset[-1]
    metrics = SODMetrics()
    for pred, gt in first:
        metrics.update(pred, gt)
    metrics.compute()
    shared = metrics.per_image()
    alone = SODMetrics.from_states([metrics.state_dict()]).per_image()
    assert shared.keys() == alone.keys()
    for key in shared:
        np.testing.assert_array_equal(shared[key], alone[key])
    shared["MAE"][:] = -1  # a copy: the kept scores are not the caller's
    assert (metrics.per_image()["MAE"] >= 0).all()
    metrics.update(*rest)
    assert len(metrics.per_image()["index"]) == len(dataset)
