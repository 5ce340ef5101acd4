"""Test-only entry point: several ``sodkit`` commands, one after another, in each process of one
launch.

``python tests/commands_entry.py ARGS --then ARGS --then ...`` under torchrun. A launch costs
its agent's and its workers' start (each imports torch, timm and sodkit), more than the tiny
runs the tests make; runs that need no launch of their own share one this way. Each command
sets up and tears down its process group as it would alone. Stops at the first command that
fails, with its exit code.
"""

from __future__ import annotations

import sys

import command_process  # noqa: F401 - first: imports as the sodkit command's

from sodkit.cli import main

SEPARATOR = "--then"


def commands(argv: list[str]) -> list[list[str]]:
    found: list[list[str]] = [[]]
    for arg in argv:
        if arg == SEPARATOR:
            found.append([])
        else:
            found[-1].append(arg)
    return found


def joined(*commands: list[str]) -> list[str]:
    """The command line that runs ``commands`` in turn."""
    out: list[str] = []
    for command in commands:
        out += [SEPARATOR, *command] if out else command
    return out


if __name__ == "__main__":
    for args in commands(sys.argv[1:]):
        code = main(args)
        if code:
            raise SystemExit(code)
