"""One folder evaluation from a request to its files: the plan, the measuring of each
dataset, its files and tables (rank 0), the summary. :func:`evaluate_folders` is what ``sodkit
eval`` calls, and what a Python caller calls with an :class:`~.request.EvalRequest`.

Besides the tables and curves it writes ``curves.json`` and ``results_per_image.csv`` (read by
``sodkit report``), ``evaluation.json`` (which folder holds which dataset) and, on request,
LaTeX / xlsx paper tables. Heavy imports (OpenCV, matplotlib) stay inside the call; torch is
imported only under ``torchrun``, where each process measures a shard of every dataset and rank
0 merges and writes (:mod:`.ranks`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .files import DeferredFolder
    from .job import Job
    from .log import Clock
    from .pool import MeasurePool
    from .ranks import Ranks
    from .request import EvalRequest

Tables = dict[str, dict[str, dict[str, float]]]  # dataset -> method -> metric -> value


def evaluate_folders(request: EvalRequest) -> Tables:
    """Evaluate the predictions the request names against its GT folders and write the files
    into ``request.out`` (rank 0), as ``sodkit eval`` does.

    Returns:
        ``{dataset: {method: {metric: value}}}``, every scalar metric of each method (rank 0;
        other ranks of a torchrun job get an empty dict).

    Raises:
        UserError: a request that cannot be evaluated (a missing folder, a prediction missing,
            an output that may not be written, ...), in one line, before any image is measured
            where it can be found then; DataError: a file that does not decode.
    """
    from ..engine.launcher import detect_dist_env
    from ..resources import cap_workers
    from .plan import gt_folders, plan
    from .pool import fork_is_safe, measure_pool, start_fork_server

    request = request.copy()  # a datasets file adds to its lists
    explicit = request.workers is not None
    fork = fork_is_safe() and detect_dist_env().world_size == 1  # torchrun imports torch
    if not fork:  # the fork server first: it boots while the files are listed
        start_fork_server(gt_folders(request), _workers(request), explicit=explicit)
    from ..report.named_outputs import check_table_outputs
    from .files import check_collisions, claim_output, write_summary
    from .log import Clock
    from .ranks import Ranks

    clock, (jobs, inputs) = Clock(), plan(request)  # every rank alike: the same refusals end all
    check_collisions(request, jobs, inputs)  # two outputs at one path, an output over an input
    check_table_outputs(request, inputs, "eval")
    ranks = Ranks()
    images = sum(len(ranks.shard(len(job.gts))) for job in jobs)  # this rank's
    workers = cap_workers(_workers(request), images, "--workers" if request.workers else None)
    pool = measure_pool(workers, images, explicit=explicit,
                        fork=fork)  # before any thread starts: the workers may be forked
    preload = _preload_plotting() if ranks.is_main else None
    failed = True
    try:
        folder = claim_output(Path(request.out), jobs, ranks, request.force)
        tables = [_write_job(job, ranks, workers, pool, folder, clock, request.show)
                  for job in jobs]
        if ranks.is_main:
            write_summary(jobs, tables, request, folder)
            clock.summary(jobs, request.out)
        failed = False
    finally:
        # A failure is reported at once: under torchrun the launcher stops this rank as soon
        # as another one has ended, so no waiting here for matplotlib's import (a daemon
        # thread) or for the workers' current images.
        if pool is not None:
            pool.close(wait=not failed)
        if preload is not None and not failed:
            preload.join()
        ranks.close()
    if not ranks.is_main:
        return {}
    return {job.name: table for job, table in zip(jobs, tables, strict=True)}


def _write_job(job: Job, ranks: Ranks, workers: int, pool: MeasurePool | None,
               folder: DeferredFolder | None, clock: Clock,
               show: Callable[[str], None] | None) -> dict[str, dict[str, float]]:
    """Measure one dataset and write its files (rank 0); returns ``{method: scalar metrics}``
    (empty on other ranks). ``show`` gets its table and intervals as text."""
    from ..metrics import STANDARD_KEYS, scalar_metrics
    from ..metrics.families import family_keys
    from ..report import markdown_table
    from .files import write_job
    from .groups import grouped_compute
    from .log import announce
    from .measure import measure_shard, per_image_rows_of
    from .temporal import fill_sequences

    announce(job)
    metrics = measure_shard(job, ranks, workers, pool, clock)
    if not ranks.is_main:
        return {}
    metrics = fill_sequences(job, metrics, workers)  # Flicker: frames in order, on rank 0
    results = {method: grouped_compute(metric, sorted(job.gts)) if job.groups
               else metric.compute() for method, metric in metrics.items()}
    table = {method: scalar_metrics(result) for method, result in results.items()}
    write_job(job, results, table, per_image_rows_of(job, metrics), folder)
    columns = STANDARD_KEYS + family_keys(job.families)  # all metrics are in the files
    if show is not None:
        show(f"\n{job.name}\n\n{markdown_table(table, 'method', columns)}")
    if job.ci is not None:
        from .intervals import write_ci

        grouped = (sorted(job.gts), results) if job.groups else None  # groups resampled
        start = time.perf_counter()
        job.ci_result, text = write_ci(job.out_dir, metrics, job.ci, folder.folder, columns,
                                       grouped, job.name)
        clock.intervals += time.perf_counter() - start
        if show is not None:
            show(text)
    return table


def _workers(request: EvalRequest) -> int:
    from ..resources import available_cores

    return max(1, request.workers if request.workers is not None else available_cores())


def _preload_plotting() -> threading.Thread:
    """Import matplotlib (0.3-0.9 s, a third of a 1000-image run's fixed cost) in a thread
    while the images are read and measured, when a core is often idle; ``plot_curves`` then
    finds it loaded. Everything the main thread imports to measure is imported before."""
    import cv2  # noqa: F401  (the measuring path's modules, so no import is shared midway)
    import tqdm  # noqa: F401

    from .. import metrics, report  # noqa: F401

    def load() -> None:
        with contextlib.suppress(Exception):  # plot_curves imports it again, and reports
            import matplotlib.figure  # noqa: F401

    thread = threading.Thread(target=load, name="sodkit-preload", daemon=True)
    thread.start()
    return thread
