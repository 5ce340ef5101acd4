"""Output folders on disk: the marker that names a folder's kind, the record of the files sodkit
wrote there (path -> sha256), and :class:`OutputFolder`, through which every such file is written
(atomically, checked, recorded). The rules built on them: :mod:`sodkit.outputs.rules`."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..atomic import TEMP_PREFIX, atomic_target
from ..errors import UserError
from ..version import __version__

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
TMP = TEMP_PREFIX  # a file being written (left behind only by a kill): sodkit's own


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


def describe(kind: str) -> str:
    """What a folder marked with ``kind`` is, for messages."""
    if not kind:
        return "a folder whose sodkit marker does not say which command made it"
    return KINDS.get(kind, f"an output folder of sodkit {kind}")


def is_owned(folder: Path) -> bool:
    """Whether ``folder`` carries sodkit's marker, i.e. sodkit created it."""
    return (Path(folder) / MARKER).is_file()


def absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


def write_marker(folder: Path, kind: str, created: str | None = None) -> None:
    info = {"sodkit": __version__, "kind": kind,
            "created": created or time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _replace(folder / MARKER, lambda tmp: tmp.write_text(json.dumps(info) + "\n"))


def _replace(path: Path, write: Callable[[Path], None]) -> None:
    """``write`` a temporary file beside ``path``, then rename it over ``path``
    (:func:`sodkit.atomic.atomic_target`: a reader never sees half a file, a failure leaves the
    old one and is one line naming the file, the file gets the user's umask)."""
    with atomic_target(path) as tmp:
        write(tmp)


class Record:
    """The ``.sodkit-files`` of one folder: path (relative, ``/``-separated) -> sha256.

    A line is appended before the file it records is renamed into place, and taken back if
    the rename or the append fails (:meth:`OutputFolder.write_with`): a write and its record
    succeed or fail together, so a full disk never leaves a file of sodkit's that its record
    does not prove. A file holding any content recorded for its path is proven (a process
    killed between the append and the rename leaves the earlier content, recorded before).
    """

    KEPT = 2  # digests per path kept when the record is compacted

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / RECORD
        self._known: dict[str, list[str]] | None = None

    def exists(self) -> bool:
        return self.path.is_file()

    def _digests(self) -> dict[str, list[str]]:
        if self._known is None:
            self._known = {}
            with contextlib.suppress(FileNotFoundError), open(self.path, encoding="utf-8",
                                                              errors="replace") as handle:
                for line in handle:
                    with contextlib.suppress(ValueError, TypeError):  # a torn line
                        rel, digest = json.loads(line)
                        known = self._known.setdefault(str(rel), [])
                        if str(digest) in known:
                            known.remove(str(digest))
                        known.append(str(digest))
        return self._known

    def hashes(self) -> dict[str, str]:
        """Each path's last recorded digest."""
        return {rel: known[-1] for rel, known in self._digests().items() if known}

    def add(self, rel: str, digest: str) -> int:
        """Append ``rel``'s digest; returns the record's size before, for :meth:`undo`. A
        failed append (a full disk) leaves the record as it was and raises the OSError."""
        line = (json.dumps([rel, digest]) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a line torn by a kill
                line = b"\n" + line
            try:
                while line:  # a short write (a file size limit) meets its error on the next
                    line = line[os.write(fd, line):]
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
        known = self._digests().setdefault(rel, [])
        if digest in known:
            known.remove(digest)
        known.append(digest)
        return size

    def undo(self, size: int) -> None:
        """Take back what :meth:`add` appended (the file it recorded was not written)."""
        with contextlib.suppress(OSError):
            os.truncate(self.path, size)
        self._known = None

    def compact(self) -> None:
        """Rewrite the record with one line per file (its last :data:`KEPT` digests) once
        rewrites have tripled it."""
        if not self.exists():
            return
        with open(self.path, "rb") as handle:
            lines = sum(1 for _ in handle)
        known = self._digests()
        if lines > 3 * self.KEPT * len(known) + 100:
            text = "".join(json.dumps([rel, digest]) + "\n" for rel, digests in known.items()
                           for digest in digests[-self.KEPT:])
            _replace(self.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
            self._known = None

    def start(self) -> None:
        """Create the record empty (a folder made by a sodkit that records its files)."""
        self.path.touch()
        self._known = {}

    def proves(self, rel: str, path: Path) -> bool:
        """Whether ``path`` holds content sodkit wrote under ``rel`` (and nobody changed)."""
        known = self._digests().get(rel)
        return bool(known) and path.is_file() and not path.is_symlink() \
            and sha256_file(path) in known


class OutputFolder:
    """Where one command writes: a folder (``root``), its kind, its record, and ``--force``.

    ``root`` is the marked folder (or, for single files in a folder of the user's, that
    folder); the write methods take full paths anywhere under it.
    """

    def __init__(self, root: Path, kind: str | None, force: bool = False,
                 record: bool = True) -> None:
        self.root = absolute(Path(root))
        self.kind = kind  # None: not a marked folder
        self.force = force
        self.flag: str | None = "--force"  # the command's option to replace a file (messages)
        self.record = Record(self.root) if record else None

    @classmethod
    def at(cls, path: str | Path) -> OutputFolder:
        """The output folder ``path`` lies in: the nearest marked folder at or above it, else
        ``path`` itself as a folder of the user's (single files; nothing is marked)."""
        path = absolute(Path(path))
        for folder in (path, *path.parents):
            kind = kind_of(folder)
            if kind is not None:
                return cls(folder, kind)
        return cls(path, None)

    def rel(self, path: Path) -> str:
        try:
            return absolute(Path(path)).relative_to(self.root).as_posix()
        except ValueError:
            raise UserError(f"refusing to write {path}: it lies outside {self.root}") from None

    def problem(self, path: Path) -> str | None:
        """Why ``path`` may not be written now, or None."""
        path = Path(path)
        if path.is_dir() and not path.is_symlink():
            return f"{path} is a folder"
        if not (path.exists() or path.is_symlink()) or self.force:
            return None
        if self.record is not None and self.record.proves(self.rel(path), path):
            return None
        written = f" by sodkit {self.kind}" if self.kind else " by sodkit"
        force = f", or pass {self.flag} to replace it" if self.flag else ""
        return (f"{path} exists and was not written{written} (no record of it), or was changed "
                f"since (edited by hand, say); move it away, choose another name{force}")

    def check(self, paths: Iterable[Path]) -> None:
        """Before any work: every one of ``paths`` may be written (see :meth:`problem`)."""
        for path in paths:
            problem = self.problem(path)
            if problem is not None:
                raise UserError(problem)

    def write_with(self, path: Path, write: Callable[[Path], None],
                   digest: str | None = None) -> Path:
        """``write(tmp)`` writes the file to a temporary path, which then replaces ``path``
        (if :meth:`problem` allows) and is recorded with its hash (``digest``, if known)."""
        with self.writing(path, digest) as tmp:
            write(tmp)
        return Path(path)

    @contextlib.contextmanager
    def writing(self, path: Path, digest: str | None = None) -> Iterator[Path]:
        """:meth:`write_with` as a context manager: the block writes the temporary path it is
        given (a video written frame by frame, while frames are yielded); an exception, or a
        generator closed early, leaves ``path`` as it was."""
        path = Path(path)
        rel = self.rel(path)
        self.check([path])
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = None
        try:
            with atomic_target(path) as tmp:
                yield tmp
                if self.record is not None:  # before the rename: both happen, or neither
                    mark = self.record.add(rel, digest or sha256_file(tmp))
        except BaseException:
            if mark is not None:  # the rename failed: the file was not replaced
                self.record.undo(mark)
            raise

    def write_bytes(self, path: Path, data: bytes) -> Path:
        return self.write_with(path, lambda tmp: tmp.write_bytes(data),
                               hashlib.sha256(data).hexdigest())

    def write_text(self, path: Path, text: str) -> Path:
        return self.write_bytes(path, text.encode("utf-8"))

    def check_unchanged(self) -> None:
        """Every file the record holds is unchanged or gone (a training run checks this when
        it starts: it rewrites them at its end, and should not fail there)."""
        for rel in self.record.hashes() if self.record is not None else ():
            path = self.root / rel
            if (path.exists() or path.is_symlink()) and not self.record.proves(rel, path):
                raise UserError(f"{path} was changed since sodkit {self.kind} wrote it (edited "
                                f"by hand, say), and this run would replace it; move it away, "
                                f"then run again")

    def unrecorded(self) -> int:
        """How many files are here that the record does not hold (in a folder of an earlier
        sodkit, which kept no record: every file but the working ones); they stay the user's."""
        record = self.record.hashes() if self.record is not None else {}
        return sum(1 for path in files_under(self.root)
                   if not is_working(self.kind, self.rel(path)) and self.rel(path) not in record)


def files_under(folder: Path, nested: list[Path] | None = None) -> Iterator[Path]:
    """Every file under ``folder`` but sodkit's own bookkeeping (marker, record, temporary
    files), links not followed (a link is listed as a file). Marked folders inside are not
    entered: they go to ``nested``."""
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
            if not name.startswith(TMP) and (parent != Path(folder) or name not in _OWN):
                yield parent / name


def is_working(kind: str | None, rel: str) -> bool:
    return rel.split("/", 1)[0] in WORKING.get(kind or "", ())
