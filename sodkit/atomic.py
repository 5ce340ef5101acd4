"""Output files written whole or not at all, with the user's permissions, and a failure named.

Every table, page, workbook and model file sodkit writes goes through :func:`atomic_target`
(or :func:`write_atomic`); checkpoints through :func:`sodkit.torchfile.save_atomic`, which keeps
the same three rules:

* **Whole or not at all.** The data goes to a temporary file beside the target, which is then
  renamed over it: a full disk or a kill mid-write leaves the previous file (or none), never
  half of one.
* **The user's permissions.** ``tempfile.mkstemp`` creates its file ``0600`` (an exported
  ``.onnx`` came out ``-rw-------``); here the temporary file is created with mode ``0666``, which
  the umask narrows as for any file the user creates (``0644`` under the usual ``022``).
* **A failure names the file.** An ``OSError`` while writing (a full disk, a read-only or
  forbidden folder, a file size limit) carries no file name once the file is open; it becomes a
  :class:`~sodkit.errors.WriteFailed` naming the target, why, and that what was there is intact.

Text outputs are not fsynced (checkpoints are): after a power cut a table may be the previous
one, never a mix.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from .errors import SaveInterrupted, WriteFailed

OUTPUT_HINT = "Free some space or choose another output folder, then run again"


TEMP_PREFIX = ".sodkit-tmp-"  # a file being written (left behind only by a kill)


def temporary_beside(path: Path) -> Path:
    """A new, empty file beside ``path`` (same folder, so the rename is atomic), mode 0666 &
    ~umask, with a hidden name that never collides with an output's, fits beside a name of any
    length, and keeps the suffix (writers such as matplotlib pick the format by it)."""
    while True:
        tmp = path.with_name(f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
                             f"{path.suffix[:16]}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_target(path: str | Path, hint: str = OUTPUT_HINT) -> Iterator[Path]:
    """Yield a temporary path to write ``path``'s content to; renamed over ``path`` when the
    block ends normally, removed otherwise.

    Raises:
        WriteFailed: an OSError while creating, writing or renaming (the file at ``path`` is
            as it was).
        SaveInterrupted: Ctrl-C during the block (likewise).
    """
    path = Path(path)
    existed = path.exists()
    tmp: Path | None = None
    try:
        tmp = temporary_beside(path)
        yield tmp
        os.replace(tmp, path)
        tmp = None
    except KeyboardInterrupt:
        raise SaveInterrupted(path, existed) from None
    except OSError as exc:
        raise WriteFailed(path, existed, exc, hint) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


def write_atomic(path: str | Path, data: str | bytes, hint: str = OUTPUT_HINT) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`atomic_target`."""
    path = Path(path)
    with atomic_target(path, hint) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
    return path
