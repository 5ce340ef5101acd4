"""Stopping a run cleanly: a signal finishes the current step, saves it, and ends the job.

Schedulers (SLURM, Kubernetes, spot instances) send SIGTERM some time before they kill a job, and
users press Ctrl-C. Either sets a flag that the trainer reads once per optimizer step; under
torchrun the flag is agreed over all ranks at that step, so every rank stops after the same step,
rank 0 writes the checkpoint, and the process exits with :data:`EXIT_PREEMPTED`. A second Ctrl-C
stops at once (the checkpoint being written, if any, stays whole: writes are atomic).

Python runs signal handlers in the main thread, between bytecodes: a rank blocked in a collective
whose peer is lost or stopped never gets there, so the flag is never read and, before this module
had a deadline, the rank waited for ``runtime.dist_timeout_s`` or for a SIGKILL. The C-level
handler still writes the signal number to :func:`signal.set_wakeup_fd`'s pipe, so a watcher thread
sees every signal and ends the process ``grace_s`` after the first one, or 10 s after a second one
(time for the main thread to act on it if it can), with exit code 143 (128 + SIGTERM) and one
line on stderr: checkpoints already written stay whole (atomic writes), a save in progress is
lost.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType

from ..errors import EXIT_PREEMPTED, Preempted

logger = logging.getLogger(__name__)

__all__ = ["EXIT_PREEMPTED", "Preempted", "SaveClock", "StopRequest"]


# True in the ``sodkit`` command's own process (``cli.console_main``), which exits right after
# the run: an armed deadline then also bounds that exit (it may block on a lost peer).
DEADLINE_OUTLIVES_RUN = False


class StopRequest:
    """SIGTERM / SIGINT handlers for the training loop (a context manager; main thread only)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, grace_s: float = 0.0) -> None:
        self.received: str | None = None
        self.grace_s = grace_s  # runtime.stop_grace_s; 0: no deadline
        self.training = False  # False: a stop before the first step (nothing to save)
        self._previous: dict[int, object] = {}
        self._watcher: _Deadline | None = None

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            self.arm(self.grace_s)
        return self

    def arm(self, grace_s: float) -> None:
        """Set the deadline once the config is known (``sodkit train`` installs its handlers
        before it reads the config)."""
        self.grace_s = grace_s
        if self._previous and self._watcher is None and grace_s > 0:
            self._watcher = _Deadline(grace_s)

    def before_training(self, any_rank: Callable[..., list[bool]] | None = None) -> None:
        """Before training starts: end the command if a stop arrived (exit 75: nothing was
        trained, nothing is written). ``any_rank``: the runtime's agreement over ranks, once
        they are joined (every rank stops, or none)."""
        stopping = self.received is not None
        if any_rank is not None:
            stopping = any_rank(stopping)[0]
        if stopping:
            raise Preempted(f"stopped by {self.received or 'a signal on another rank'} before "
                            f"training started: nothing was trained or written; run the same "
                            f"command again")

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
        if self._watcher is not None:  # after a signal its deadline stays: the exit may block
            self._watcher.detach()
            self._watcher = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = name
        if not self.training:
            logger.warning("%s received: stopping before training starts (press Ctrl-C again "
                           "to stop at once)", name)
            return
        logger.warning("%s received: finishing this step, then saving a checkpoint (press "
                       "Ctrl-C again to stop at once)", name)


class SaveClock:
    """Step and wall-clock cadence of in-epoch checkpoints (``train.checkpoint_every_steps``,
    ``train.checkpoint_minutes``)."""

    def __init__(self, every_steps: int, minutes: float) -> None:
        self.every_steps, self.seconds = every_steps, minutes * 60.0
        self.last = time.monotonic()

    def due(self, step: int) -> bool:
        by_steps = bool(self.every_steps) and step % self.every_steps == 0
        by_time = bool(self.seconds) and time.monotonic() - self.last >= self.seconds
        return by_steps or by_time

    def saved(self) -> None:
        self.last = time.monotonic()


class _Deadline:
    """A daemon thread that reads the signal wake-up pipe and ends a process that does not stop.

    Armed by the first SIGTERM/SIGINT; the process normally exits well before (the step and its
    save take seconds). Only a process that does not return to Python (blocked in a collective)
    or that hangs on its way out reaches the deadline.
    """

    SECOND_SIGNAL_S = 10.0

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)  # the C handler must never block
        self._old_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._armed = threading.Event()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="sodkit-stop-deadline", daemon=True).start()

    def detach(self) -> None:
        """Give the wake-up fd back. The thread ends too, unless a signal armed it and the
        process is about to exit (:data:`DEADLINE_OUTLIVES_RUN`): a process that goes on after
        the run (a test, a notebook calling ``sodkit.cli.main``) must not be ended later."""
        signal.set_wakeup_fd(self._old_fd)
        if not self._armed.is_set() or not DEADLINE_OUTLIVES_RUN:
            self._stop.set()

    def _run(self) -> None:
        try:
            self._watch()
        finally:
            os.close(self._read)
            os.close(self._write)

    def _watch(self) -> None:
        deadline = None
        signals = 0
        while not self._stop.is_set():
            timeout = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
            ready, _, _ = select.select([self._read], [], [], timeout)
            if ready:
                for number in os.read(self._read, 64):
                    if number not in (signal.SIGTERM, signal.SIGINT):
                        continue
                    signals += 1
                    self._armed.set()
                    limit = self.grace_s if signals == 1 else self.SECOND_SIGNAL_S
                    end = time.monotonic() + limit
                    deadline = end if deadline is None else min(deadline, end)
            if deadline is not None and time.monotonic() >= deadline:
                self._exit(signals)

    def _exit(self, signals: int) -> None:
        reason = (f"still running {self.grace_s:g} s after the stop signal" if signals == 1 else
                  "a second stop signal")
        os.write(2, (f"sodkit: {reason} (blocked in a collective with a lost or stopped peer?): "
                     f"exiting now without a new checkpoint; those written before stay whole "
                     f"(runtime.stop_grace_s)\n").encode())
        os._exit(128 + signal.SIGTERM)
