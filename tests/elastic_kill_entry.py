"""Test-only entry point: ``sodkit`` whose rank RANK is SIGKILLed before optimizer step STEP,
once per job: the kill creates the file MARKER, and no process kills itself while it exists.

``python tests/elastic_kill_entry.py RANK STEP MARKER <sodkit arguments> [--then <sodkit
arguments> ...]`` under ``torchrun --max-restarts=K``: the commands run in turn
(``tests/commands_entry.py``: runs that need no launch of their own share this one) and the
kill is in the last; the restarted job must continue from the newest checkpoint by itself
(the commands before it run again, and find their runs complete). In the restarted attempt
rank 0 starts the last command 3 s late, as a slow node does: the other ranks must not mistake
the dead attempt's rendezvous entries (torchelastic's store outlives its workers) for its.
(``TORCHELASTIC_RESTART_COUNT`` cannot tell the attempts apart: on several nodes, an agent that
restarts because another node's worker died does not count it.) Production code has no failure
switch; this script patches its own process only.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import command_process  # noqa: F401 - first: imports as the sodkit command's
from commands_entry import commands  # this folder: the script's own (sys.path[0])

from sodkit.cli import main
from sodkit.engine.runtime import Runtime


def inject(kill_rank: int, kill_step: int, marker: Path) -> None:
    original = Runtime.optimizer_step
    calls = {"n": 0}

    def optimizer_step(self, optimizer, model, grad_clip):
        calls["n"] += 1
        if self.rank == kill_rank and calls["n"] == kill_step:
            marker.touch(exist_ok=False)
            os.kill(os.getpid(), signal.SIGKILL)  # no handler, no cleanup: a lost machine
        return original(self, optimizer, model, grad_clip)

    Runtime.optimizer_step = optimizer_step


if __name__ == "__main__":
    rank, step, marker = int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    *before, last = commands(sys.argv[4:])
    restarted = marker.exists()
    for args in before:
        code = main(args)
        if code:
            raise SystemExit(code)
    if not restarted:
        inject(rank, step, marker)
    elif os.environ.get("RANK") == "0":
        time.sleep(3.0)
    raise SystemExit(main(last))
