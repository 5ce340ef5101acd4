"""Waiting for the processes a test starts: a hang fails the test, a busy machine does not.

A fixed timeout ("the run ends within 300 s") is a guess at the machine's speed: on a machine
shared with other work the same run takes five times as long and the test fails for nothing,
and on a quiet one a hang is found late. So a process here has as long as it makes progress:
it, or a process it started (torchrun's workers, a loader's workers), used CPU time or printed a
line within the last ``idle_s`` seconds. A process that waits for what never comes (a lost peer,
a collective, a full pipe) uses next to none and is ended, with every process it started,
after ``idle_s`` of that. A process that only runs slowly is never ended: a busy machine still gives
each runnable process CPU time every few hundred milliseconds.

The CPU time of a process tree is read from ``/proc`` (Linux, as the rest of these tests).
"""

from __future__ import annotations

import collections
import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import pytest

IDLE_S = 60.0  # with no line printed and next to no CPU time used for this long: hung
POLL_S = 0.2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, CPU ticks of the process and of its waited-for children)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) "
        ppid = int(fields[1])
        ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        table[int(entry.name)] = (ppid, ticks)
    return table


def threshold() -> float:
    """A quarter of the CPU share (of one core) that each runnable process gets now."""
    share = len(os.sched_getaffinity(0)) / max(1.0, os.getloadavg()[0])
    return 0.25 * min(1.0, share)


def tree_pids(roots: list[int], table: dict[int, tuple[int, int]] | None = None) -> list[int]:
    """The processes ``roots`` and everything they started, still alive (or not yet reaped)."""
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (ppid, _) in table.items():
        children[ppid].append(pid)
    found, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        if pid in found or pid not in table:
            continue
        found.append(pid)
        stack.extend(children[pid])
    return found


def tree_ticks(roots: list[int]) -> int:
    """CPU ticks used so far by the processes ``roots`` and everything they started."""
    table = _proc_table()
    return sum(table[pid][1] for pid in tree_pids(roots, table))


class Watchdog:
    """Ends ``procs`` (and all they started) and fails the test once they have not progressed
    for ``idle_s`` seconds: no line printed, and their process trees used less than a quarter
    of the CPU share each runnable process gets now (``cores / load average``, at most one
    core). A waiting job is not at zero (a torchrun job deadlocked in a collective used 2% of a
    core: its agent polls the workers, gloo and the stop watcher wake up), a running one gets
    its share: at a load of 10 on 2 cores, 20% against a threshold of 5%. On a machine so busy
    that the threshold falls below a waiting job's use, a hang is found late (by the job's own
    collective timeout), never a slow job ended."""

    def __init__(self, procs: list[subprocess.Popen], idle_s: float = IDLE_S,
                 tail: list[str] | None = None, said: Callable[[], str] | None = None
                 ) -> None:
        """``tail``: the lines printed so far, or ``said``: what was printed; the failure
        message ends with it."""
        self.procs, self.idle_s = procs, idle_s
        self.said = said if said is not None else lambda: "".join((tail or [])[-30:])
        self.samples: collections.deque[tuple[float, int]] = collections.deque()
        self.ticks: dict[int, int] = {}  # every process seen in the trees: its CPU ticks

    def progressed(self) -> None:
        self.samples.clear()

    def check(self) -> None:
        """A process that ends (one node's agent, a restarted worker) keeps its ticks in the
        sum: dropping them made the others' use negative, and a job that still ran, hung."""
        now = time.monotonic()
        table = _proc_table()
        for pid in tree_pids([p.pid for p in self.procs if p.poll() is None], table):
            self.ticks[pid] = max(self.ticks.get(pid, 0), table[pid][1])
        self.samples.append((now, sum(self.ticks.values())))
        while len(self.samples) > 1 and self.samples[1][0] <= now - self.idle_s:
            self.samples.popleft()  # keep one sample at or before the window's start
        start, ticks = self.samples[0]
        used = (self.samples[-1][1] - ticks) / CLOCK_TICKS
        if now - start >= self.idle_s and used < threshold() * (now - start):
            kill(self.procs)
            said = self.said()
            pytest.fail(f"{len(self.procs)} process(es) hung: {used:.2f} s of CPU time (less "
                        f"than {threshold():.1%} of a core) and no line printed in "
                        f"{now - start:.0f} s\n{said}")


def kill(procs: list[subprocess.Popen]) -> None:
    """SIGKILL each process and everything it started, then reap them. The tree is frozen
    first (SIGSTOP, twice to catch a child started meanwhile): torchrun starts each worker in
    a session of its own, so a process group would not reach them, and a worker whose agent
    died first is no longer found below it."""
    roots = [proc.pid for proc in procs if proc.poll() is None]
    stopped: list[int] = []
    for _ in range(2):
        for pid in tree_pids(roots):
            if pid not in stopped:
                _signal(pid, signal.SIGSTOP)
                stopped.append(pid)
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    for proc in procs:
        proc.wait()


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def until_idle(proc: subprocess.Popen, quiet_s: float = 1.0, idle_s: float = IDLE_S) -> None:
    """Return once ``proc`` (its process tree) has used next to no CPU time (2 ticks, 20 ms)
    for ``quiet_s``: it waits for something, say a collective whose peer is stopped. Fails if
    it never does."""
    samples: collections.deque[tuple[float, int]] = collections.deque()
    start = time.monotonic()
    while True:
        now = time.monotonic()
        samples.append((now, tree_ticks([proc.pid])))
        while len(samples) > 1 and samples[1][0] <= now - quiet_s:
            samples.popleft()
        if now - samples[0][0] >= quiet_s and samples[-1][1] - samples[0][1] <= 2:
            return
        if now - start > idle_s:
            kill([proc])
            pytest.fail(f"process {proc.pid} kept using CPU time for {idle_s:g} s")
        time.sleep(0.05)


def wait(*procs: subprocess.Popen, idle_s: float = IDLE_S,
         output: Callable[[], int] | None = None,
         said: Callable[[], str] | None = None) -> list[int]:
    """Each process's exit code, once all have ended (or the test fails on a hang). ``output``:
    how much they have printed so far (printing counts as progress); ``said``: what they
    printed, for the failure message."""
    dog = Watchdog(list(procs), idle_s, said=said)
    printed = 0
    for proc in procs:
        while True:
            try:
                proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                if output is not None and output() != printed:
                    printed = output()
                    dog.progressed()
                dog.check()
    return [proc.returncode for proc in procs]


def start(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` in a session of its own: signals meant for the test's terminal
    (Ctrl-C) reach the test, which ends what it started (:func:`kill`)."""
    return subprocess.Popen(cmd, start_new_session=True, **kwargs)


def run(cmd: list[str], idle_s: float = IDLE_S, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, **kwargs)`` under a watchdog
    instead of a timeout."""
    return run_all([cmd], idle_s=idle_s, **kwargs)[0]


def run_all(cmds: list[list[str]], idle_s: float = IDLE_S, env: dict | list | None = None,
            **kwargs) -> list[subprocess.CompletedProcess]:
    """Run commands side by side (the nodes or ranks of one job): ``env`` is one environment
    for all or a list of one per command. Their output is read through pipes as it comes (a
    chatty process never blocks; a file would count against a test's RLIMIT_FSIZE)."""
    envs = env if isinstance(env, list) else [env] * len(cmds)
    procs = [start(cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                   **kwargs) for cmd, e in zip(cmds, envs, strict=True)]
    texts: list[list[str]] = []
    readers = []
    for proc in procs:
        for stream in (proc.stdout, proc.stderr):
            chunks: list[str] = []
            texts.append(chunks)
            readers.append(threading.Thread(target=_drain, args=(stream, chunks), daemon=True))
            readers[-1].start()
    try:
        wait(*procs, idle_s=idle_s, output=lambda: sum(len(t) for t in texts),
             said=lambda: _tails(procs, texts))
    finally:
        kill(procs)
    for reader in readers:
        reader.join()
    return [subprocess.CompletedProcess(proc.args, proc.returncode, "".join(texts[2 * i]),
                                        "".join(texts[2 * i + 1]))
            for i, proc in enumerate(procs)]


def _tails(procs: list[subprocess.Popen], texts: list[list[str]], n: int = 30) -> str:
    """The last ``n`` lines each process printed on each stream, with its exit code so far."""
    parts = []
    for i, proc in enumerate(procs):
        for name, chunks in (("stdout", texts[2 * i]), ("stderr", texts[2 * i + 1])):
            parts.append(f"--- process {i} (exit {proc.poll()}) {name} ---\n"
                         + "".join(list(chunks)[-n:]))
    return "\n".join(parts)


def _drain(stream, chunks: list[str]) -> None:
    for line in stream:
        chunks.append(line)
    stream.close()


def lines(proc: subprocess.Popen, stream=None, idle_s: float = IDLE_S,
          seen: list[str] | None = None) -> Iterator[str]:
    """The lines ``proc`` prints on ``stream`` (default: its stdout) as they come, under a
    watchdog; ``seen`` collects them for a failure message. Read to the end (a thread reads
    the stream meanwhile): act on a line and go on, do not break out."""
    stream = stream if stream is not None else proc.stdout
    got: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            got.put(line)
        got.put(None)

    threading.Thread(target=pump, daemon=True).start()
    dog = Watchdog([proc], idle_s, seen)
    while True:
        try:
            line = got.get(timeout=POLL_S)
        except queue.Empty:
            dog.check()
            continue
        if line is None:
            return
        dog.progressed()
        if seen is not None:
            seen.append(line)
        yield line
