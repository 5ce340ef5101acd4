"""Test-only entry point: ``sodkit`` whose rank RANK is SIGKILLed before optimizer step STEP,
in the first attempt of a torchrun job only (``TORCHELASTIC_RESTART_COUNT`` = 0).

``python tests/elastic_kill_entry.py RANK STEP <sodkit arguments>`` under ``torchrun
--max-restarts=K``: the restarted job must continue from the newest checkpoint by itself.
Production code has no failure switch; this script patches its own process only.
"""

from __future__ import annotations

import os
import signal
import sys

from sodkit.cli import main
from sodkit.engine.runtime import Runtime


def inject(kill_rank: int, kill_step: int) -> None:
    original = Runtime.optimizer_step
    calls = {"n": 0}

    def optimizer_step(self, optimizer, model, grad_clip):
        calls["n"] += 1
        first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
        if first_attempt and self.rank == kill_rank and calls["n"] == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # no handler, no cleanup: a lost machine
        return original(self, optimizer, model, grad_clip)

    Runtime.optimizer_step = optimizer_step


if __name__ == "__main__":
    inject(int(sys.argv[1]), int(sys.argv[2]))
    raise SystemExit(main(sys.argv[3:]))
