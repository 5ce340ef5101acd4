"""Per-image weighted F-measures in persistent worker threads, helped by the calling thread.

``SODMetrics`` queues the weighted F-measure of every image of a chunk first, so the workers
start at once, then computes the chunk's histogram metrics in the calling thread and helps
drain the queue, returning as soon as it is empty: the workers finish the images they hold
while the caller buffers the next chunk. Waiting there for a chunk's slowest image (a pool per
chunk, as before) left one core idle for about one image per chunk. Everything is awaited
before results are read.

Scores land in float64 arrays owned by the caller, one element per image; which thread computes
an image never changes its value. OpenCV and most numpy work release the GIL, hence threads.
(Queueing each image at ``update`` instead, to keep the worker busy while the caller buffers,
measured the same, in memory and in ``sodkit eval``: buffering is short next to measuring.)"""

from __future__ import annotations

import collections
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from .prepare import is_tensor
from .wfmeasure import weighted_fmeasure_uint8
from .workspace import opencv_single_threaded, scratch


def weighted_fmeasure_of_pair(pred: np.ndarray, gt: np.ndarray) -> float:
    """:func:`weighted_fmeasure_uint8` of a uint8 prediction and a uint8 GT (``gt > 128``)."""
    fg = np.greater(gt, 128, out=scratch("wf gt", gt.shape, bool))
    return weighted_fmeasure_uint8(pred, fg)


def pairs_of(pred: np.ndarray, gt: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(pred, gt) 2-D numpy pairs of a (B, H, W) batch (CUDA tensors copied to the CPU)."""
    if is_tensor(pred):
        pred, gt = pred.cpu().numpy(), gt.cpu().numpy()
    return list(zip(pred, gt, strict=True))


class WeightedFQueue:
    """Images waiting for their weighted F-measure, drained by worker threads and callers.

    Args:
        workers: worker threads (0: callers compute everything in :meth:`drain`).
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._jobs: collections.deque = collections.deque()  # thread-safe append / popleft
        self._lock = threading.Lock()
        self._active = 0  # worker tasks started and not finished
        self._pool = ThreadPoolExecutor(workers, "sodkit-wf") if workers > 0 else None
        self._futures: list[Future] = []

    def submit(self, pairs: list[tuple[np.ndarray, np.ndarray]], out: np.ndarray) -> None:
        """Queue uint8 (pred, gt) pairs; ``out[i]`` receives the score of ``pairs[i]``.

        The arrays must stay untouched until :meth:`close` returns (the caller's own copies).
        """
        self._jobs.extend((pred, gt, out, i) for i, (pred, gt) in enumerate(pairs))
        if self._pool is None:
            return
        with self._lock:  # a worker leaves only after seeing the queue empty under this lock
            start = self.workers - self._active
            self._active += start
        self._futures += [self._pool.submit(self._work) for _ in range(start)]
        for future in [f for f in self._futures if f.done()]:
            future.result()  # a worker's exception surfaces here (or in close)
            self._futures.remove(future)

    def _work(self) -> None:
        try:
            while True:
                self.drain()
                with self._lock:
                    if not self._jobs:
                        self._active -= 1
                        return
        except BaseException:
            with self._lock:
                self._active -= 1
            raise

    def drain(self) -> None:
        """Compute queued images until none is left (run by workers and by callers)."""
        with opencv_single_threaded():  # per thread: IPP off, and OpenCV's pool idle
            while True:
                try:
                    pred, gt, out, i = self._jobs.popleft()
                except IndexError:
                    return
                out[i] = weighted_fmeasure_of_pair(pred, gt)

    def close(self) -> None:
        """Help until the queue is empty, wait for the workers' last images, stop them."""
        try:
            self.drain()
        finally:
            futures, self._futures = self._futures, []
            try:
                for future in futures:
                    future.result()
            finally:
                if self._pool is not None:
                    self._pool.shutdown()
