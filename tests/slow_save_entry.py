"""Test-only entry point: ``sodkit`` whose checkpoint writes of step STEP take a minute.

``python tests/slow_save_entry.py STEP <sodkit arguments>``: after torch.save has written that
step's temporary file, the process announces ``SLOW SAVE`` on stderr and sleeps, so that a test
can press Ctrl-C (twice) in the middle of a save. Production code has no such switch; this
script patches its own process only.
"""

from __future__ import annotations

import sys
import time

import command_process  # noqa: F401 - first: imports as the sodkit command's
import torch

from sodkit.cli import main


def slow_down(step: int) -> None:
    original = torch.save

    def save(obj, f, *args, **kwargs):
        original(obj, f, *args, **kwargs)
        if f"step_{step:08d}.pt" in str(getattr(f, "name", f)):
            print("SLOW SAVE", file=sys.stderr, flush=True)
            time.sleep(60)

    torch.save = save


if __name__ == "__main__":
    slow_down(int(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
