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

    def compact(self) -> None:
        """Rewrite the record with one line per file once rewrites have tripled it."""
        if not self.exists():
            return
        with open(self.path, "rb") as handle:
            lines = sum(1 for _ in handle)
        if lines > 3 * len(self.hashes()) + 100:
            text = "".join(json.dumps([r, d]) + "\n" for r, d in self.hashes().items())
            _replace(self.path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

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
        self.root = absolute(Path(root))
        self.kind = kind  # None: not a marked folder
        self.force = force
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

    def write_with(self, path: Path, write: Callable[[Path], None],
                   digest: str | None = None) -> Path:
        """``write(tmp)`` writes the file to a temporary path, which then replaces ``path``
        (if :meth:`problem` allows) and is recorded with its hash (``digest``, if known)."""
        path = Path(path)
        rel = self.rel(path)
        self.check([path])
        path.parent.mkdir(parents=True, exist_ok=True)
        digests = [digest]

        def hashed(tmp: Path) -> None:
            write(tmp)
            digests.append(digest or sha256_file(tmp))

        _replace(path, hashed)
        if self.record is not None:
            self.record.add(rel, digests[-1])
        return path

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

    def adopt(self) -> int:
        """Record the files already here (a folder of a sodkit that kept no record); returns
        how many. Working files (:data:`WORKING`) are left out: they need no record."""
        self.record.start()
        count = 0
        for path in files_under(self.root):
            rel = self.rel(path)
            if path.is_file() and not path.is_symlink() and not is_working(self.kind, rel):
                self.record.add(rel, sha256_file(path))
                count += 1
        return count


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
