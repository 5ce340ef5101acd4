"""Default loader workers and compute threads, chosen from the cores this process may use.

Loader workers (decoding, augmentation) and the training step's intra-op threads compete for the
same cores. Measured on a 2-core CPU with the demo (``benchmarks/RESULTS.md``): the bare training
step reached 38-42 images/s, the trainer 35 images/s with 0 workers, 32 with 2 and 28.5 with 1;
a worker only pays once a core is left over for it. So:

- ``data.num_workers`` (None = auto): 0 with 2 cores or fewer (decoding runs in the training
  process between steps), otherwise half the cores, at most 8;
- ``runtime.num_threads`` (None = auto): ``OMP_NUM_THREADS`` when set, else the cores left
  after the automatic workers (at least 1).

"Cores" are the CPUs in this process's affinity mask divided by the processes ``torchrun`` starts
on this machine (``LOCAL_WORLD_SIZE``), so ranks sharing a machine do not oversubscribe it.

A count the user gives (``--workers``, ``data.num_workers``) is capped by :func:`cap_workers`: at
most one worker per item of work, and :data:`WORKERS_PER_CORE` per core (a worker waits for its
files part of the time, so a few more than the cores can pay; 200 cannot, and each holds its
own memory), with a line saying so.
"""

from __future__ import annotations

import logging
import os

from .text import plural

MAX_AUTO_WORKERS = 8
WORKERS_PER_CORE = 2

logger = logging.getLogger(__name__)


def available_cores() -> int:
    """CPUs this process may use, shared among the local ranks."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return max(1, cores // max(local, 1))


def default_workers(cores: int | None = None) -> int:
    cores = available_cores() if cores is None else cores
    return 0 if cores <= 2 else min(cores // 2, MAX_AUTO_WORKERS)


def default_threads(cores: int | None = None) -> int:
    """Intra-op threads: ``OMP_NUM_THREADS`` when set (torchrun sets it), else the cores left
    over by the automatic loader workers."""
    if cores is None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    cores = available_cores() if cores is None else cores
    return max(1, cores - default_workers(cores))


def resolve_workers(configured: int | None) -> int:
    """``data.num_workers``: the configured count, or the automatic one for None."""
    return default_workers() if configured is None else configured


def cap_workers(requested: int, work: int | None = None, what: str | None = None) -> int:
    """``requested`` workers, at most one per item of ``work`` (None: unknown) and
    :data:`WORKERS_PER_CORE` per core; ``what`` (the setting's name) gets a line when capped."""
    cores = available_cores()
    capped = min(requested, WORKERS_PER_CORE * cores, requested if work is None else max(work, 1))
    if capped < requested and what is not None:
        work_text = "" if work is None else f"one per item of work ({work}) and "
        logger.info("%s %d: using %d (at most %s%d per core, %s)", what, requested,
                    capped, work_text, WORKERS_PER_CORE, plural(cores, "core"))
    return capped
