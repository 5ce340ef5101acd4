"""Stopping a run cleanly: a signal finishes the current step, saves it, and ends the job.

Schedulers (SLURM, Kubernetes, spot instances) send SIGTERM some time before they kill a job, and
users press Ctrl-C. Either sets a flag that the trainer reads once per optimizer step; under
torchrun the flag is agreed over all ranks at that step, so every rank stops after the same step,
rank 0 writes the checkpoint, and the process exits with :data:`EXIT_PREEMPTED`. A second Ctrl-C
stops at once (the checkpoint being written, if any, stays whole: writes are atomic).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from types import FrameType

from ..errors import EXIT_PREEMPTED, Preempted

logger = logging.getLogger(__name__)

__all__ = ["EXIT_PREEMPTED", "Preempted", "SaveClock", "StopRequest"]


class StopRequest:
    """SIGTERM / SIGINT handlers for the training loop (a context manager; main thread only)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.received = name
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
