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
_STARTED_BY_COMMAND = False


def mark_started_by_command() -> None:
    """Called once by the ``sodkit`` command's entry point (:func:`sodkit.cli.console_main`)."""
    global _STARTED_BY_COMMAND
    _STARTED_BY_COMMAND = True


def started_by_command() -> bool:
    """Whether this process is the ``sodkit`` command's own (not a test or a notebook that calls
    :func:`sodkit.cli.main`): nothing but the command has run in it, so process-wide choices
    (a fork server for worker pools) are safe."""
    return _STARTED_BY_COMMAND

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


# glibc's mallopt parameters (malloc.h) and the values keep_freed_memory sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit systems
TRIM_THRESHOLD = 512 << 20


def keep_freed_memory() -> bool:
    """Let glibc keep freed tensor memory for reuse instead of returning it to the system.

    By default glibc serves every allocation above a threshold that starts at 128 KiB (a
    feature map, an image-sized score map) with its own mapping and unmaps it when freed, and
    returns free memory at the top of its heap: each forward pass then faults in its
    activations anew. In ``sodkit predict`` on 200 photos with the demo network that was about
    200,000 page faults and 4% of the command's time; with these thresholds, 37,000 (the
    decoding workers' shared batches, the checkpoint). A process keeps up to
    :data:`TRIM_THRESHOLD` of freed memory, so this is for the short inference commands
    (``predict``, ``test``), not for the library in someone else's process. Returns whether the
    thresholds were set (glibc only; elsewhere nothing changes)."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


_CGROUPS = (("/sys/fs/cgroup/", "memory.max", "memory.current", "inactive_file"),  # v2
            ("/sys/fs/cgroup/memory/", "memory.limit_in_bytes", "memory.usage_in_bytes",
             "total_inactive_file"))  # v1


def available_memory() -> int | None:
    """Bytes of memory this process can still have without swapping: the kernel's
    ``MemAvailable`` (free memory plus the caches it can reclaim), or less where a container's
    cgroup limit leaves less (its limit minus its usage, plus the file cache it may drop, as
    ``docker stats`` counts); None where neither can be read (not Linux)."""
    found = []
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            found += [int(line.split()[1]) * 1024 for line in handle
                      if line.startswith("MemAvailable:")]
    except (OSError, ValueError):
        pass
    for folder, limit, usage, cache in _CGROUPS:
        try:
            text = _read(folder + limit)
            if text == "max" or int(text) >= 1 << 60:  # no limit (v1 writes a huge number)
                continue
            stat = dict(line.split() for line in _read(folder + "memory.stat").splitlines())
            found.append(max(int(text) - int(_read(folder + usage)) + int(stat.get(cache, 0)),
                             0))
        except (OSError, ValueError):
            continue
    return min(found) if found else None


def _read(path: str) -> str:
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()
