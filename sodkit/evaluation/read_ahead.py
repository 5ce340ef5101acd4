"""``sodkit eval``'s reads ahead of the measuring, in the command's own process: bounded by
bytes, not only by a count.

Threads read and decode the next pairs while this thread measures. A fixed count of pairs
ahead (4 per worker thread) was memory by luck of the image sizes and the methods: on a
64-core machine, 256 pairs of 8K masks with 10 methods ahead were 90 GB. The first pair read
gives the size of one (its GT and every prediction, decoded); no more pairs are read ahead than
:data:`MAX_AHEAD_BYTES` holds of such pairs (at least one), and the estimate grows with the
largest pair seen.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

MAX_AHEAD_BYTES = 1 << 30  # decoded pairs read ahead of the one being measured


def pair_bytes(pair: tuple[Any, list[Any]]) -> int:
    """Decoded bytes of a (GT, predictions) pair (None: a method without this image)."""
    gt, preds = pair
    return gt.nbytes + sum(pred.nbytes for pred in preds if pred is not None)


def prefetch(read: Callable[[str], Any], items: list[str], workers: int,
             size: Callable[[Any], int] = pair_bytes) -> Iterator[Any]:
    """``read`` over ``items`` in threads, in order, with at most ``4 x workers`` (at least 8)
    reads ahead and no more than :data:`MAX_AHEAD_BYTES` of them by the largest ``size`` seen.

    Close it when stopping early (``contextlib.closing``): left to the garbage collector, its
    pool's shutdown joins threads from inside a collection, which can happen while a new
    thread holds threading's shutdown lock (a deadlock seen in the test suite). Reads not yet
    started are cancelled then."""
    most = max(4 * workers, 8)
    largest = 0
    pool = ThreadPoolExecutor(max(workers, 1))
    try:
        pending: deque[Future] = deque()
        following = 0
        for _ in range(len(items)):
            allowed = most if largest == 0 else max(1, min(most, MAX_AHEAD_BYTES // largest))
            while following < len(items) and (len(pending) < 1 or (
                    largest and len(pending) <= allowed)):
                pending.append(pool.submit(read, items[following]))
                following += 1
            result = pending.popleft().result()
            largest = max(largest, size(result))
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
