"""Test-only entry point: ``python tests/own_lines_entry.py LINES_FILE ARGS...`` runs ``sodkit
ARGS`` as the ``sodkit`` command does (``console_main``), and writes to ``LINES_FILE`` every
message that sodkit's own loggers emitted, one JSON string a line. A test then tells sodkit's
lines on the terminal from any other library's: a line of stderr that is none of these came
from elsewhere (``tests/test_quiet_libraries.py``).

The extra handler sits on the ``sodkit`` logger, so it changes nothing that reaches the root's
handlers, which print to the terminal.
"""

from __future__ import annotations

import json
import logging
import sys

import command_process  # noqa: F401 - first: imports as the sodkit command's


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


if __name__ == "__main__":
    from sodkit.cli import console_main

    keep = Keep()
    logging.getLogger("sodkit").addHandler(keep)
    lines_file, sys.argv = sys.argv[1], [sys.argv[0], *sys.argv[2:]]
    try:
        code = console_main()
    finally:
        with open(lines_file, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(m) + "\n" for m in keep.messages)
    raise SystemExit(code)
