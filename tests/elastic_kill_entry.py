"""Test-only entry point: ``sodkit`` whose rank RANK is SIGKILLed before optimizer step STEP,
in the first attempt of a torchrun job only (``TORCHELASTIC_RESTART_COUNT`` = 0).

``python tests/elastic_kill_entry.py RANK STEP <sodkit arguments>`` under ``torchrun
--max-restarts=K``: the restarted job must continue from the newest checkpoint by itself. In the
restarted attempts the same rank starts 3 s late, as a slow node does: the other ranks must not
mistake the dead attempt's rendezvous entries (torchelastic's store outlives its workers) for its.
Production code has no failure switch; this script patches its own process only.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from sodkit.cli import main
from sodkit.engine.runtime import Runtime


def inject(kill_rank: int, kill_step: int) -> None:
    original = Runtime.optimizer_step
    calls = {"n": 0}

    def optimizer_step(self, optimizer, model, grad_clip):
        calls["n"] += 1
        if self.rank == kill_rank and calls["n"] == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # no handler, no cleanup: a lost machine
        return original(self, optimizer, model, grad_clip)

    Runtime.optimizer_step = optimizer_step


if __name__ == "__main__":
    rank, step = int(sys.argv[1]), int(sys.argv[2])
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        inject(rank, step)
    elif int(os.environ.get("RANK", "0")) == 0:
        time.sleep(3.0)
    raise SystemExit(main(sys.argv[3:]))
