"""Errors caused by what the user wrote or pointed at; the CLI prints them and exits with 2."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
from pathlib import Path

# torch's DataLoader re-raises a worker's exception as the same class with the worker's whole
# traceback as its message; the last line "module.Class: message" holds what the user needs.
_WORKER_TRACEBACK = re.compile(r"^Caught \w+ in DataLoader worker process \d+\.")
_LAST_ERROR_LINE = re.compile(r"^[\w.]*(?:Error|Exception): (.*)$")
# torch's DataLoader when a worker process dies (its SIGCHLD handler, or a failed queue read)
_WORKER_DEATH = re.compile(r"DataLoader worker \(pid\(?s?\)? ([\d, ]+)\) "
                           r"(?:is killed by signal: ([\w ]+?)\.?\s*$|exited unexpectedly)")


def _one_line(message: str) -> str:
    if not _WORKER_TRACEBACK.match(message):
        return message
    lines = [line for line in message.splitlines() if _LAST_ERROR_LINE.match(line)]
    return _LAST_ERROR_LINE.match(lines[-1]).group(1) if lines else message


class UserError(Exception):
    """A mistake the user can fix (bad config, missing folder, unreadable file): no traceback.

    Raised in a DataLoader worker, it reaches the main process with the worker's traceback as
    its message; the constructor keeps only the original message, so the user sees one line
    whether or not workers are used.
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(_one_line(str(message)))


class ConfigError(UserError, ValueError):
    """A config file or override the user must fix; the CLI exits with code 2."""


class DataError(UserError):
    """A dataset problem: missing folder, unmatched pairs, unreadable image; names the path."""


EXIT_PREEMPTED = 75  # EX_TEMPFAIL: stopped on request after saving; resume with --resume auto


class Preempted(Exception):
    """Training stopped on SIGTERM / SIGINT after saving its state; the CLI exits with
    :data:`EXIT_PREEMPTED` so that job scripts can tell it from a failure and requeue."""

    exit_code = EXIT_PREEMPTED


def _left_intact(existed: bool) -> str:
    """What an atomic write that did not finish left behind."""
    return ("the file there before is intact" if existed
            else "it was not written; files saved before are intact")


class SaveInterrupted(KeyboardInterrupt):
    """Ctrl-C (a second one: the first only asks to stop after the step) while a file was being
    written. Writes are atomic, so the file there before, if any, is untouched; the message says
    so in one line instead of a traceback through ``torch.save``."""

    def __init__(self, path: object, existed: bool) -> None:
        super().__init__(f"interrupted while writing {path}: {_left_intact(existed)}")


WRITE_HINT = "Free some space or choose another folder, then run again"


class WriteFailed(UserError):
    """A file could not be written (disk full, no permission, file size limit). Writes are
    atomic, so what was there before is untouched; the command stops with one line saying so
    (``sodkit train`` adds how to resume: see ``sodkit.cli``)."""

    def __init__(self, path: object, existed: bool, error: OSError,
                 hint: str = WRITE_HINT) -> None:
        reason = error.strerror or str(error)
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            with contextlib.suppress(OSError):
                free = shutil.disk_usage(Path(str(path)).parent).free
                reason += f" ({free / 2**20:.0f} MiB free there)"
        self.path, self.error = path, error
        super().__init__(f"could not write {path}: {reason}; {_left_intact(existed)}. {hint}")


# errno values that mean "this output cannot be written here"; EACCES / EPERM may also be a
# read of an input, so their line says "create or open" and needs the file's name
_NO_ROOM = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_FORBIDDEN = {errno.EACCES, errno.EPERM}


def write_error_line(exc: OSError) -> str | None:
    """One line for an OSError of a full disk, a read-only or forbidden folder or a file size
    limit (naming the file when the error carries it); None for other errors.

    Writers that know their file raise :class:`WriteFailed`; this is the net under every other
    write (a folder created, a log opened, a third-party writer), in ``sodkit.cli``.
    """
    name = os.fsdecode(exc.filename) if exc.filename is not None else None
    reason = exc.strerror or str(exc)
    target = f"cannot write {name}" if name is not None else "a file could not be written"
    if exc.errno in _NO_ROOM:
        return f"{target}: {reason}; free some space or choose another output folder"
    if exc.errno == errno.EROFS:
        return f"{target}: {reason}; choose another output folder"
    if exc.errno in _FORBIDDEN and name is not None:
        return (f"cannot create or open {name}: {reason}; check its permissions, or choose "
                f"another output folder")
    return None


def worker_death(exc: BaseException) -> str | None:
    """What to tell the user when a DataLoader worker process died, or None for other errors.

    torch raises this from its SIGCHLD handler wherever the main process happens to be (deep in
    a convolution, say), so the traceback says nothing useful; the cause is nearly always the
    out-of-memory killer.
    """
    found = _WORKER_DEATH.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if found is None:
        return None
    how = f"was killed by a signal ({found.group(2)})" if found.group(2) else \
        "exited unexpectedly"
    return (f"a data loading worker (pid {found.group(1)}) {how}, most often by the system's "
            "out-of-memory killer: lower data.num_workers or data.prefetch_factor, or give the "
            "job more memory")
