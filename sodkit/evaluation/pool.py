"""``sodkit eval``'s images measured in worker processes, one run of images per task.

Threads in one process could not keep the cores busy: reading a mask, its histograms and its
weighted F-measure are each a few dozen numpy / OpenCV calls, and the Python between them holds
the GIL. On 2 cores, 1000 pairs used 1.4 cores' worth of CPU with threads; worker processes keep
both busy (benchmarks/RESULTS.md, "eval speed"), and they scale with the cores of larger machines.

Each task reads and measures a run of consecutive images into a ``SODMetrics`` of its own and
returns its state; records are keyed by dataset index, so the merged states are the records of
one process, and every number and file is bit for bit the same (tests/test_eval_command.py).

In a process the ``sodkit`` command started, workers are forked from it before any thread
starts. Elsewhere they come from a fork server that imported the measuring modules once: a
fork hangs the child inside OpenCV whenever OpenCV's thread pool already ran in the parent (a
test session, a notebook), and ``spawn`` imports numpy and OpenCV again in every worker.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    import numpy as np

# Below this many images the fork server's start (about 0.3 s on 2 cores) costs more than the
# second core gains; the images are then measured in this process.
MIN_IMAGES = 64
TASKS_PER_WORKER = 8  # runs per worker and dataset: the last to finish waits less for the others
MAX_RUN = 32

Pair = tuple[int, str, list[str | None]]  # dataset index, GT file, a prediction per method


def read_pair(gt_path: str | Path, pred_paths: Sequence[str | Path | None]
              ) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The GT and each prediction at the GT's size (uint8; bilinear resize on the uint8 map, as
    PySODEvalToolkit does); None for a method without this prediction (``--allow-missing``)."""
    import cv2

    from ..imageio import read_mask

    gt = read_mask(gt_path)
    preds = []
    for path in pred_paths:
        if path is None:
            preds.append(None)
            continue
        pred = read_mask(path)
        if pred.shape != gt.shape:
            pred = cv2.resize(pred, gt.shape[::-1], interpolation=cv2.INTER_LINEAR)
        preds.append(pred)
    return gt, preds


def measure_run(pairs: list[Pair], methods: int, families: tuple[str, ...] = (),
                images: list[str] | None = None, trimaps: list[str] | None = None
                ) -> tuple[list[dict[str, Any]], Counter]:
    """One ``SODMetrics`` state per method for a run of pairs (the worker's task), and the mask
    encodings converted on the way (``mask_encoding.take_notes``), for the command to report."""
    from ..imageio import read_image_at
    from ..mask_encoding import take_notes
    from ..metrics import SODMetrics
    from ..trimap import read_trimap

    take_notes()  # a forked worker starts with its parent's counts
    metrics = [SODMetrics(threads=1, families=families) for _ in range(methods)]
    for k, (index, gt_path, pred_paths) in enumerate(pairs):
        gt, preds = read_pair(gt_path, pred_paths)
        image = None if images is None else read_image_at(images[k], gt.shape)
        trimap = None if trimaps is None else read_trimap(trimaps[k], gt.shape)
        for metric, pred in zip(metrics, preds, strict=True):
            if pred is not None:
                metric.update(pred, gt, index=index, image=image, trimap=trimap)
    return [metric.state_dict() for metric in metrics], take_notes()


def _single_threaded() -> None:
    """Each worker is one core's worth of work: OpenCV's own threads would oversubscribe. And
    it prints no other library's warning (a fork server's child has no handlers of its own)."""
    import cv2

    from ..engine.logging import quiet_worker_process

    cv2.setNumThreads(1)
    quiet_worker_process()


def _context(fork: bool) -> multiprocessing.context.BaseContext:
    if fork:
        return multiprocessing.get_context("fork")
    if worker_context_is_forkserver():
        context = multiprocessing.get_context("forkserver")
        # Imported once by the server, inherited by every worker it forks.
        context.set_forkserver_preload([__name__, "sodkit.imageio", "sodkit.metrics"])
        return context
    return multiprocessing.get_context("spawn")


def fork_is_safe() -> bool:
    """Whether workers may be forked from this process itself, which saves the fork server's
    start (its imports: about 0.35 s of CPU, and the workers begin that much later).

    Only in a process the ``sodkit`` command started (before ``sodkit eval`` runs, nothing in it
    has used OpenCV's thread pool, whose threads a forked child would wait for forever), while
    no other thread runs and torch is not imported (its thread pools; a gloo group under
    torchrun), and on Linux (macOS system libraries are not fork-safe). Anywhere else (tests,
    notebooks, torchrun) the fork server is used.
    """
    from ..resources import started_by_command

    return (started_by_command() and sys.platform.startswith("linux")  # macOS: fork-unsafe
            and threading.active_count() == 1 and "torch" not in sys.modules)


def start_fork_server(gt_folders: Sequence[Path], workers: int, explicit: bool) -> None:
    """Boot the fork server now when worker processes are likely to be used: it imports numpy,
    OpenCV and the metrics (about 0.3 s) while this process lists and pairs the files, instead
    of after. The file count is an estimate (folder entries); a wrong guess costs the server's
    start on an idle core."""
    if not worker_context_is_forkserver() or workers < 2:
        return
    entries = 0
    for folder in gt_folders:
        try:
            entries += sum(1 for _ in os.scandir(folder))
        except OSError:
            return  # plan() reports the folder
    if worth_processes(workers, entries, explicit):
        from multiprocessing import forkserver

        _context(fork=False)
        forkserver.ensure_running()


def worker_context_is_forkserver() -> bool:
    return "forkserver" in multiprocessing.get_all_start_methods()


def worth_processes(workers: int, images: int, explicit: bool) -> bool:
    """Whether worker processes should measure ``images`` images: more than one core, and
    enough images for the workers' start to pay (unless ``--workers`` asked for them)."""
    return workers > 1 and (explicit or images >= MIN_IMAGES)


def measure_pool(workers: int, images: int, explicit: bool, fork: bool) -> MeasurePool | None:
    """Worker processes for ``images`` images (``None``: measure in this process), forked from
    this process when ``fork`` and :func:`fork_is_safe` still hold."""
    if not worth_processes(workers, images, explicit):
        return None
    return MeasurePool(workers, fork=fork and fork_is_safe())


def runs(count: int, workers: int) -> int:
    """Images per task for ``count`` images on ``workers`` processes."""
    return max(1, min(MAX_RUN, -(-count // (workers * TASKS_PER_WORKER))))


class MeasurePool:
    """Worker processes that measure runs of images, reused for every dataset of the command.

    Args:
        workers: processes (each measures one image at a time).
        fork: fork them from this process now (see :func:`fork_is_safe`); otherwise they come
            from the fork server when the first images are submitted.
    """

    def __init__(self, workers: int, fork: bool = False) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        if fork:
            from .. import metrics  # noqa: F401  (loaded once here, shared by every worker)

            self._pool = self._executor(fork=True)
            self._pool.submit(int).result()  # forks every worker now, before any thread starts

    def _executor(self, fork: bool) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(self.workers, mp_context=_context(fork),
                                   initializer=_single_threaded)

    def measure(self, pairs: list[Pair], methods: int, done: Callable[[int], None],
                families: tuple[str, ...] = (), images: list[str] | None = None,
                trimaps: list[str] | None = None) -> list[list[dict[str, Any]]]:
        """Every pair measured; per task, one state per method (in the order of ``pairs``).

        Args:
            pairs: (index, GT file, prediction files) per image.
            methods: predictions per pair.
            done: called with the number of images of each finished task (a progress bar).
            families: the optional metric families to compute as well.
            images: each pair's RGB image file, for the families that read them.
            trimaps: each pair's trimap file, for the matting family (``--trimaps``).

        Raises:
            The first task's error (a file that does not decode: a ``DataError``).
        """
        if self._pool is None:
            self._pool = self._executor(fork=False)
        size = runs(len(pairs), self.workers)
        futures = {}
        try:
            for start in range(0, len(pairs), size):
                run = pairs[start:start + size]
                run_images = None if images is None else images[start:start + size]
                run_trimaps = None if trimaps is None else trimaps[start:start + size]
                futures[self._pool.submit(measure_run, run, methods, families,
                                          run_images, run_trimaps)] = len(run)
            for future in as_completed(futures):
                future.result()  # the first failure ends the wait
                done(futures[future])
        except BrokenProcessPool:
            raise UserError("a worker process of sodkit eval died (killed, or out of memory?); "
                            "--workers 1 measures in the command's own process") from None
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        from ..mask_encoding import add_notes

        results = [future.result() for future in futures]
        for _, notes in results:
            add_notes(notes)  # reported by the command, as if this process had read the files
        return [states for states, _ in results]

    def close(self, wait: bool = True) -> None:
        """Stop the workers: queued images are dropped; ``wait`` for their current ones."""
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None
