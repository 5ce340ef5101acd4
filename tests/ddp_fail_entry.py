"""Test-only entry point: ``sodkit`` with one rank raising at a chosen optimizer step.

``python tests/ddp_fail_entry.py RANK STEP <sodkit arguments>`` (under torchrun or with SLURM
variables). Production code has no failure switch; this script patches the runtime's optimizer
step in its own process only.
"""

from __future__ import annotations

import sys

import command_process  # noqa: F401 - first: imports as the sodkit command's

from sodkit.cli import main
from sodkit.engine.runtime import Runtime


def inject(fail_rank: int, fail_step: int) -> None:
    original = Runtime.optimizer_step
    calls = {"n": 0}

    def optimizer_step(self, optimizer, model, grad_clip):
        calls["n"] += 1
        if self.rank == fail_rank and calls["n"] == fail_step:
            raise RuntimeError(f"injected failure at step {fail_step}")
        return original(self, optimizer, model, grad_clip)

    Runtime.optimizer_step = optimizer_step


if __name__ == "__main__":
    inject(int(sys.argv[1]), int(sys.argv[2]))
    raise SystemExit(main(sys.argv[3:]))
