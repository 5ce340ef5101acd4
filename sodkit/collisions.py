"""Two outputs, one path: a command's outputs checked against each other and its inputs, first.

A command with several output options (``eval --out --latex --xlsx``, ``report --out --latex
--xlsx --figures``) could be given one path twice: ``eval --latex EV/results.md`` replaced the
Markdown table eval had just written into ``EV``, and ``--latex t.tex --xlsx t.tex`` left a
workbook named ``.tex``. The rules of :mod:`sodkit.outputs` cannot see that: each write is of a
file sodkit wrote a moment ago. So each command lists everything it will write (each option's
files, the files it writes into its output folders, the folders it creates, and the record and
marker files that go with them) and everything it reads, and :func:`check_outputs` refuses,
before any work, one line naming both options:

* two outputs that are one file (the same path, or one existing file under two names: a hard
  link, or another case on a file system that ignores case);
* an output that is a folder another output creates, or a record / marker file sodkit keeps;
* an output that is an input file (a methods file, a stem list, a style file) or lies inside an
  input folder (GT, predictions, images, a run folder given to ``report``).

Paths are compared after ``resolve()`` (links followed); an existing file by its device and
inode, so a hard link or another case of its name on a file system that ignores case is the
same file. Light imports only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

MARKER, RECORD = ".sodkit-run", ".sodkit-files"  # sodkit.outputs' names (no import: light)


@dataclass(frozen=True)
class Output:
    """What one option writes.

    Attributes:
        option: the option that names it (``--latex``), shown in the message.
        path: the file (``files`` empty) or the folder it writes into.
        files: for a folder, the files written in it (relative, ``ECSSD/results.md``).
        folders: for a folder, the sub-folders it creates (relative).
        what: how a file of the folder is named in a message (default ``<option>'s``).
    """

    option: str
    path: Path
    files: Sequence[str] = ()
    folders: Sequence[str] = ()
    what: str = ""

    def written(self) -> list[tuple[Path, str]]:
        """Each file this output writes, with how a message names it."""
        if not self.files:
            return [(Path(self.path), f"{self.option} {self.path}")]
        return [(Path(self.path) / name, f"{self.option} {self.path}'s {name}")
                for name in self.files]

    def kept(self) -> list[tuple[Path, str]]:
        """The files sodkit keeps beside what it writes (the record of the files in a folder,
        its marker) and the folders it writes into."""
        root = Path(self.path) if self.files else Path(self.path).parent
        out = [(root / RECORD, f"sodkit's record of the files it wrote in {root} ({RECORD})"),
               (root / MARKER, f"sodkit's marker of {root} ({MARKER})")]
        if not self.files:
            return out
        out.append((root, f"the folder {self.option} writes into"))
        return out + [(root / sub, f"the folder {self.option} {root} writes {sub}'s files into")
                      for sub in self.folders]


@dataclass(frozen=True)
class Inputs:
    """What a command reads: folders (nothing is written inside them) and single files."""

    folders: Sequence[Path] = ()
    files: Sequence[Path] = field(default_factory=tuple)


def _key(path: Path) -> tuple:
    """One key per file: an existing file's device and inode (hard links, case), else its
    resolved path without case."""
    try:
        info = os.stat(path)
    except OSError:
        return ("path", str(Path(path).resolve()))
    return ("inode", info.st_dev, info.st_ino)


def _inside(path: Path, folder: Path) -> bool:
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def check_outputs(outputs: Iterable[Output], inputs: Inputs = Inputs()) -> None:
    """Refuse, in one line naming both, two outputs at one path, an output at a path sodkit
    keeps or creates as a folder, and an output that is or lies in an input. Call it before
    any work (nothing is read or written here but ``stat``)."""
    outputs = [o for o in outputs if o.path is not None]
    taken: dict[tuple, str] = {}
    for output in outputs:
        for path, name in output.written():
            key = _key(path)
            if key in taken and taken[key] != name:
                raise UserError(f"{name} and {taken[key]} are the same file ({path}): one "
                                f"would replace the other; give each output its own path")
            taken[key] = name
    for output in outputs:
        for path, name in output.kept():
            other = taken.get(_key(path))
            if other is not None:
                raise UserError(f"{other} is {name}; give it another path")
    for path, name in (p for o in outputs for p in o.written()):
        for source in inputs.files:
            if _key(path) == _key(source):
                raise UserError(f"{name} is the input {source}: sodkit never writes over what it "
                                f"reads, --force or not; give the output another path")
        for folder in inputs.folders:
            if _inside(path, folder):
                raise UserError(f"{name} lies inside the input folder {folder}: sodkit writes "
                                f"nothing into its inputs, --force or not; choose an output "
                                f"outside them")
