"""What ``sodkit eval`` says while it works: what it computes, how far it is, how long it took.

``--compute all`` used to log "10 images measured in 0.23 s" and then compute the families for
another 9 s per method without a word: images measured in the command's own process were only
buffered by then (``SODMetrics`` measures them in batches). Now each dataset's line says which
metrics it computes, the measured line times the measuring itself (the buffers are measured
inside it; with families, image by image, so the progress display moves with the work), and
the command ends with the time of the whole, measuring, intervals and files together.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..text import plural

if TYPE_CHECKING:
    from ..metrics import SODMetrics
    from .job import Job
    from .pool import MeasurePool
    from .ranks import Ranks

logger = logging.getLogger(__name__)


def computed(families: Sequence[str]) -> str:
    """``the standard metrics`` and the ``--compute`` families, in words."""
    return "the standard metrics" + (f" and {', '.join(families)}" if families else "")


def announce(job: Job) -> None:
    """The dataset's first line: its images, methods and what is computed for each."""
    ci = (f"; 95% intervals by {job.ci.resamples} bootstrap resamples" if job.ci is not None
          else "")
    logger.info("%s: %s, methods: %s; computing %s%s", job.name, plural(len(job.gts), "image"),
                ", ".join(job.preds), computed(job.families), ci)


def new_metrics(job: Job, threads: int) -> dict[str, SODMetrics]:
    """An accumulator per method for this process's images. With families, each image is
    measured as it comes (their cost dwarfs the batching's gain), so progress is the work's."""
    from ..metrics import SODMetrics
    from ..metrics.sod import CHUNK_PIXELS

    chunk = 1 if job.families else CHUNK_PIXELS
    return {method: SODMetrics(chunk, threads=threads, families=job.families)
            for method in job.preds}


def finish(metrics: dict[str, SODMetrics]) -> None:
    """Measure what the accumulators still buffer, so that the measuring is timed whole."""
    for metric in metrics.values():
        metric.records()


def measured(job: Job, ranks: Ranks, pool: MeasurePool | None, counts: Sequence[int],
             seconds: float) -> None:
    """The line saying the dataset's images were measured, by whom and in how long."""
    shards = (f" by {ranks.world_size} processes ({' + '.join(map(str, counts))})"
              if ranks.world_size > 1 else "")
    each = " each" if shards else ""
    workers = (f" with {plural(pool.workers, 'worker process')}{each}" if pool is not None
               else "")
    logger.info("%s: %s measured%s%s in %.2f s", job.name, plural(len(job.gts), "image"),
                shards, workers, seconds)


class Clock:
    """The command's time, and how much of it went into measuring and into intervals."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.measuring = 0.0
        self.intervals = 0.0

    def summary(self, jobs: Sequence[Job], out: str) -> None:
        """The last line: what was evaluated, in how long, where the results are."""
        methods = {method for job in jobs for method in job.preds}
        parts = [f"measuring {self.measuring:.2f} s"]
        if self.intervals:
            parts.append(f"intervals {self.intervals:.2f} s")
        logger.info("evaluated %s x %s in %.2f s (%s); results written to %s",
                    plural(len(jobs), "dataset"), plural(len(methods), "method"),
                    time.perf_counter() - self.start, ", ".join(parts), out)
