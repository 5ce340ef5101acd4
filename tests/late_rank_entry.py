"""Test-only entry point: ``sodkit`` with rank 0 starting late.

``python tests/late_rank_entry.py SECONDS <sodkit arguments>`` under torchrun: rank 0 sleeps
SECONDS before it runs the command, as on a loaded machine where the other ranks get ahead of it.
"""

from __future__ import annotations

import os
import sys
import time

import command_process  # noqa: F401 - first: imports as the sodkit command's

from sodkit.cli import main

if __name__ == "__main__":
    if os.environ.get("RANK") == "0":
        time.sleep(float(sys.argv[1]))
    raise SystemExit(main(sys.argv[2:]))
