"""Outputs by kind: which command made a folder, and which files it wrote there.

Every folder sodkit creates for its outputs carries a marker, ``.sodkit-run``: JSON with the
*kind* of the command that made it (``train``, ``test``, ``eval``, ``predict``, ``report``).
Beside it, ``.sodkit-files`` records each file sodkit wrote into the folder with the file's
sha256 at write time (JSON lines, appended; a path's last line counts). From the two follow the
rules every command obeys (docs/reliability.md, section 3):

* a command writes into a marked folder only when the folder is of its own kind; ``--force``
  does not change that (the folder is another command's output, whose files belong together);
* an existing file is replaced only when the record holds its current hash, i.e. sodkit wrote
  it and nobody changed it since; otherwise only with ``--force`` where the command has one;
* ``--overwrite`` deletes a folder of its own kind only when every file in it is such a file
  (plus, for a training run, its checkpoints, TensorBoard events and log: :data:`WORKING`).

Single files named by the user (``--latex``, ``--xlsx``, ``report --out``) follow the same rules:
they are recorded in the ``.sodkit-files`` of the marked folder they lie in, or else of their own
folder (which is not marked: it stays the user's). Light imports only (no torch, no numpy).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from . import __version__
from .errors import UserError

logger = logging.getLogger(__name__)

MARKER = ".sodkit-run"  # the kind of the command that made the folder
RECORD = ".sodkit-files"  # each file sodkit wrote there, with its sha256
KINDS = {"train": "a training run folder of sodkit train",
         "test": "an output folder of sodkit test",
         "eval": "an output folder of sodkit eval",
         "predict": "an output folder of sodkit predict",
         "report": "a folder sodkit report created"}
# What a kind writes without a record, by first path component: files it keeps appending to
# while it runs (the log, TensorBoard events) and checkpoints (written by their own atomic
# writer). ``--overwrite`` deletes them with the folder.
WORKING = {"train": ("checkpoints", "tb", "train.log", "config.yaml"), "test": ("test.log",)}
_OWN = (MARKER, RECORD)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_marker(folder: Path) -> dict | None:
    """The marker's fields; None without a marker, ``{}`` for one that says nothing (``touch``)."""
    path = Path(folder) / MARKER
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def kind_of(folder: Path) -> str | None:
    """The kind its marker names; ``""`` for a marker without a kind, None for no marker."""
    info = read_marker(folder)
    return None if info is None else str(info.get("kind") or "")


def is_owned(folder: Path) -> bool:
    """Whether ``folder`` carries sodkit's marker, i.e. sodkit created it."""
    return (Path(folder) / MARKER).is_file()


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def _write_marker(folder: Path, kind: str, created: str | None = None) -> None:
    info = {"sodkit": __version__, "kind": kind,
            "created": created or time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _replace(folder / MARKER, lambda tmp: tmp.write_text(json.dumps(info) + "\n"))


def _replace(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file beside ``path`` (same suffix: writers pick the format by it),
    then rename it over ``path``: a reader never sees half a file, a failure leaves the old."""
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


class Record:
    """The ``.sodkit-files`` of one folder: path (relative, ``/``-separated) -> sha256."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / RECORD
        self._hashes: dict[str, str] | None = None

    def exists(self) -> bool:
        return self.path.is_file()

    def hashes(self) -> dict[str, str]:
        if self._hashes is None:
            self._hashes = {}
            with contextlib.suppress(FileNotFoundError), open(self.path, encoding="utf-8",
                                                              errors="replace") as handle:
                for line in handle:
                    with contextlib.suppress(ValueError, TypeError):  # a torn last line
                        rel, digest = json.loads(line)
                        self._hashes[str(rel)] = str(digest)
        return self._hashes

    def add(self, rel: str, digest: str) -> None:
        self.hashes()[rel] = digest
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps([rel, digest]) + "\n")

    def start(self) -> None:
        """Create the record empty (a folder made by a sodkit that records its files)."""
        self.path.touch()
        self._hashes = {}

    def proves(self, rel: str, path: Path) -> bool:
        """Whether ``path`` holds what sodkit last wrote under ``rel``."""
        digest = self.hashes().get(rel)
        return digest is not None and path.is_file() and not path.is_symlink() \
            and sha256_file(path) == digest


class OutputFolder:
    """Where one command writes: a folder (``root``), its kind, its record, and ``--force``.

    ``root`` is the marked folder (or, for single files in a folder of the user's, that
    folder); the write methods take full paths anywhere under it.
    """

    def __init__(self, root: Path, kind: str | None, force: bool = False,
                 record: bool = True) -> None:
        self.root = _absolute(Path(root))
        self.kind = kind  # None: not a marked folder
        self.force = force
        self.record = Record(self.root) if record else None

    @classmethod
    def at(cls, path: str | Path) -> OutputFolder:
        """The output folder ``path`` lies in: the nearest marked folder at or above it, else
        ``path`` itself as a folder of the user's (single files; nothing is marked)."""
        path = _absolute(Path(path))
        for folder in (path, *path.parents):
            kind = kind_of(folder)
            if kind is not None:
                return cls(folder, kind)
        return cls(path, None)

    def rel(self, path: Path) -> str:
        try:
            return _absolute(Path(path)).relative_to(self.root).as_posix()
        except ValueError:
            raise UserError(f"refusing to write {path}: it lies outside {self.root}") from None

    def problem(self, path: Path) -> str | None:
        """Why ``path`` may not be written now, or None."""
        path = Path(path)
        if path.is_dir() and not path.is_symlink():
            return f"{path} is a folder"
        if not (path.exists() or path.is_symlink()) or self.force:
            return None
        if self.record is not None and (self.record.proves(self.rel(path), path) or (
                self.kind and not self.record.exists())):  # an earlier sodkit's: claim adopts
            return None
        written = f" by sodkit {self.kind}" if self.kind else " by sodkit"
        return (f"{path} exists and was not written{written}, or was changed since (edited by "
                f"hand, say); move it away, choose another name, or pass --force to replace it")

    def check(self, paths: Iterable[Path]) -> None:
        """Before any work: every one of ``paths`` may be written (see :meth:`problem`)."""
        for path in paths:
            problem = self.problem(path)
            if problem is not None:
                raise UserError(problem)

    def write_with(self, path: Path, write: Callable[[Path], None]) -> Path:
        """``write(tmp)`` writes the file to a temporary path, which then replaces ``path``
        (if :meth:`problem` allows) and is recorded with its hash."""
        path = Path(path)
        rel = self.rel(path)
        self.check([path])
        path.parent.mkdir(parents=True, exist_ok=True)
        digest: list[str] = []

        def hashed(tmp: Path) -> None:
            write(tmp)
            digest.append(sha256_file(tmp))

        _replace(path, hashed)
        if self.record is not None:
            self.record.add(rel, digest[0])
        return path

    def write_bytes(self, path: Path, data: bytes) -> Path:
        return self.write_with(path, lambda tmp: tmp.write_bytes(data))

    def write_text(self, path: Path, text: str) -> Path:
        return self.write_bytes(path, text.encode("utf-8"))

    def adopt(self) -> int:
        """Record the files already here (a folder of a sodkit that kept no record); returns
        how many. Working files (:data:`WORKING`) are left out: they need no record."""
        self.record.start()
        count = 0
        for path in _files(self.root):
            rel = self.rel(path)
            if not _is_working(self.kind, rel):
                self.record.add(rel, sha256_file(path))
                count += 1
        return count


def _files(folder: Path, nested: list[Path] | None = None) -> Iterator[Path]:
    """Every file under ``folder`` but sodkit's own bookkeeping, links not followed (a link is
    listed as a file). Marked folders inside are not entered: they go to ``nested``."""
    for parent, dirs, names in os.walk(folder):
        parent = Path(parent)
        for name in sorted(dirs):
            sub = parent / name
            if sub.is_symlink():
                yield sub
                dirs.remove(name)
            elif is_owned(sub):
                dirs.remove(name)
                if nested is not None:
                    nested.append(sub)
        dirs.sort()
        for name in sorted(names):
            if parent != Path(folder) or name not in _OWN:
                yield parent / name


def _is_working(kind: str | None, rel: str) -> bool:
    return rel.split("/", 1)[0] in WORKING.get(kind or "", ())


def _kind_problem(folder: Path, found: str, kind: str, choose: str) -> str | None:
    """Why ``sodkit kind`` may not write into ``folder``, marked with ``found`` (``""``: a
    marker without a kind); None if it may. ``choose`` ends the message: what to do instead."""
    if found == kind or (found == "" and kind == "train"):
        return None
    if found == "":
        return (f"{folder} carries sodkit's marker ({MARKER}) but it does not say which "
                f"command made it (an earlier sodkit, or marked by hand): sodkit train can "
                f"continue it as a training run; for sodkit {kind} {choose}")
    made = KINDS.get(found, f"an output folder of sodkit {found}")
    return (f"{folder} is {made}; sodkit {kind} writes only into folders of its own (new, "
            f"empty, or made by sodkit {kind}), --force or not: {choose}")


def check_claim(folder: str | Path, kind: str, force: bool = False, what: str = "--out"
                ) -> None:
    """Before any work: :func:`claim` would accept ``folder`` (it changes nothing)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{what} {folder} is a file, not a folder; choose a folder for the output")
    info = read_marker(folder)
    if info is None:
        if folder.is_dir() and any(folder.iterdir()) and not force:
            raise UserError(
                f"{what} {folder} already holds files and was not created by sodkit (no "
                f"{MARKER} marker); choose a new or empty folder, or pass --force to write "
                f"into it anyway (only files of the names sodkit writes are replaced, nothing "
                f"is deleted)")
        return
    problem = _kind_problem(folder, str(info.get("kind") or ""), kind, f"choose another {what}")
    if problem is not None:
        raise UserError(f"{what} {problem}")


def claim(folder: str | Path, kind: str, force: bool = False, what: str = "--out"
          ) -> OutputFolder:
    """Make ``folder`` an output folder of ``kind``, creating it with the marker if needed.

    Accepted: a new or empty folder (marked now); a folder marked with ``kind``; for ``train``,
    a folder whose marker names no kind (a run of an earlier sodkit: the marker gets the kind);
    with ``force``, a non-empty folder without the marker, which stays the user's (unmarked,
    nothing recorded; files of the names written are replaced). A marked folder without a
    record (sodkit 0.2 kept none) has its present files recorded as its own, once.
    Anything else is a UserError that says what was found and what to do.
    """
    folder = Path(folder)
    check_claim(folder, kind, force, what)
    info = read_marker(folder)
    if info is None:
        if folder.is_dir() and any(folder.iterdir()):  # force: the user's folder stays theirs
            return OutputFolder(folder, None, force=True, record=False)
        folder.mkdir(parents=True, exist_ok=True)
        _write_marker(folder, kind)
        out = OutputFolder(folder, kind, force)
        out.record.start()
        return out
    if info.get("kind") != kind:  # a run marked without a kind: now a train run
        _write_marker(folder, kind, info.get("created"))
    out = OutputFolder(folder, kind, force)
    if not out.record.exists():
        count = out.adopt()
        logger.info("%s was made by an earlier sodkit, which kept no record of its files: its "
                    "%d files are taken as sodkit %s's own", folder, count, kind)
    return out


def removal_problem(folder: str | Path, kind: str) -> str | None:
    """Why ``sodkit kind --overwrite`` may not delete ``folder``; None when it may.

    It may when the folder is of its own kind and every file in it is one that sodkit wrote
    and nobody changed since (or a :data:`WORKING` file of the kind). Marked folders inside
    (a test output in a run) are held to their own record. Folders without a record (made by
    sodkit 0.2, or a run marked by hand) are deleted as sodkit 0.2 did: marked is enough.
    """
    folder = Path(folder)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        what = "symbolic link" if folder.is_symlink() else "file"
        return f"{folder} is a {what}, not a folder sodkit created"
    found = kind_of(folder)
    if not folder.exists():
        return None
    if found is None:
        return (f"{folder} was not created by sodkit (no {MARKER} marker), so it is not "
                f"deleted; choose another name, or move the folder away yourself")
    if _kind_problem(folder, found, kind, "") is not None:
        made = KINDS.get(found, "a folder whose marker does not say which command made it")
        return f"{folder} is {made}; sodkit {kind} --overwrite deletes only its own outputs"
    for path in _unproven(folder, found or kind):
        return (f"{path} was not written by sodkit {kind}, or was changed since; move it "
                f"away, then run again")
    return None


def _unproven(folder: Path, kind: str) -> Iterator[Path]:
    """Files under ``folder`` that its record does not prove (none without a record)."""
    record = Record(folder)
    if not record.exists():
        return
    nested: list[Path] = []
    root = _absolute(folder)
    for path in _files(folder, nested):
        rel = _absolute(path).relative_to(root).as_posix()
        if not _is_working(kind, rel) and not record.proves(rel, path):
            yield path
    for sub in nested:
        yield from _unproven(sub, kind_of(sub) or "")


def single_file(path: str | Path, kind: str, force: bool, what: str,
                inputs: Iterable[Path] = (), flag: str = "--force") -> OutputFolder:
    """Where the single file ``path`` (``--latex``, ``--xlsx``, ``report --out``) is recorded,
    after checking that ``sodkit kind`` may write it: not an input nor inside an input folder
    (``force`` or not), not in a marked folder of another kind, and, if it exists, written by
    sodkit and unchanged since, or ``force``. Call again just before writing."""
    from .paths import check_not_input

    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    check_not_input(path, list(inputs), what)
    out = OutputFolder.at(path.parent)
    if out.kind is not None:
        problem = _kind_problem(out.root, out.kind, kind, f"write {what} elsewhere")
        if problem is not None:
            raise UserError(f"{what} {path}: {problem}".replace("--force", flag))
    out.force = force
    problem = out.problem(path)
    if problem is not None:
        raise UserError(f"{what} {problem}".replace("--force", flag))
    return out


def write_single(path: str | Path, kind: str, force: bool, what: str,
                 write: Callable[[Path], None]) -> None:
    """Write the single file ``path`` (see :func:`single_file`); a missing folder is created
    as an output folder of ``kind``."""
    path = Path(path)
    if not path.parent.exists():
        claim(path.parent, kind)
    single_file(path, kind, force, what).write_with(path, write)
    logger.info("wrote %s", path)
