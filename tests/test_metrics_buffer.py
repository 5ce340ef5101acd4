"""``SODMetrics`` buffers images to measure them in batches of one size; with images of many
sizes (DIS5K, HRSOD, any folder of photos) no size's buffer reached its batch, and every image
stayed in memory until the end: images x pixels x methods, by luck of the sizes (#32). The
buffers of all sizes together are now bounded by ``chunk_pixels``, and the numbers are those of
one pass."""

from __future__ import annotations

import tracemalloc

import numpy as np

from sodkit.metrics import SODMetrics
from sodkit.metrics.testing import realistic_pair

CHUNK = 1 << 18  # 0.26 MP of buffers


def held_after(pairs) -> tuple[int, SODMetrics]:
    """Bytes still held once every pair went in (its own copies: only buffers keep them). One
    thread: the measuring's scratch arrays are this thread's, already as large as they get."""
    tracemalloc.start()
    try:
        metrics = SODMetrics(chunk_pixels=CHUNK, threads=1)
        for pred, gt in pairs:
            metrics.update(pred.copy(), gt.copy())
        return tracemalloc.get_traced_memory()[0], metrics
    finally:
        tracemalloc.stop()


def test_images_of_many_sizes_are_not_all_held_until_the_end():
    rng = np.random.default_rng(9)
    pairs = [realistic_pair(rng, 200, 200 + i) for i in range(120)]  # 120 sizes, 2 x 5 MP
    reference = SODMetrics(chunk_pixels=1, threads=1)  # measured one by one (and the scratch
    for pred, gt in pairs:  # arrays grown to the largest image before anything is counted)
        reference.update(pred, gt)
    expected = reference.compute()
    few, _ = held_after(pairs[:60])
    many, metrics = held_after(pairs)
    # the 60 more images' records are a few KB each; their pixels were 2 x 2.6 MB more
    assert many - few < 1 << 20, (few, many)
    result = metrics.compute()
    for key, value in expected.items():
        np.testing.assert_array_equal(result[key], value, err_msg=key)
