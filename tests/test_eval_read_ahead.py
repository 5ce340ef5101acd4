"""``sodkit eval`` reads pairs ahead of the measuring in its own process, bounded by bytes
(#32): 4 reads ahead per thread were, on a 64-core machine, 256 pairs of 8K masks x 10 methods
(90 GB) by luck of the image sizes; now at most ``MAX_AHEAD_BYTES`` of pairs the size of the
largest seen, in order, every item once."""

from __future__ import annotations

import threading

import numpy as np

from sodkit.evaluation.read_ahead import MAX_AHEAD_BYTES, pair_bytes, prefetch


def test_reads_ahead_are_bounded_by_bytes_and_come_in_order():
    lock, read, taken, most = threading.Lock(), [], [], [0]

    def load(item: int) -> int:
        with lock:
            read.append(item)
            most[0] = max(most[0], len(read) - len(taken))
        return item

    for size, bound in ((MAX_AHEAD_BYTES // 2, 1 + 2), (1, 1 + 4 * 8)):
        read.clear(), taken.clear()
        most[0] = 0
        for item in prefetch(load, list(range(60)), workers=8, size=lambda _, s=size: s):
            taken.append(item)
        assert taken == list(range(60))
        assert most[0] <= bound, (size, most[0])  # was 32 ahead whatever the size


def test_a_pair_counts_its_gt_and_every_prediction():
    gt, pred = np.zeros((10, 20), np.uint8), np.zeros((10, 20), np.uint8)
    assert pair_bytes((gt, [pred, None, pred])) == 3 * 200
