"""The rules of outputs by kind (see :mod:`sodkit.outputs`): which folder a command may claim,
which folder ``--overwrite`` may delete, where a single file named by the user may go."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..errors import UserError
from ..paths import check_not_input
from ..text import noun_for, plural
from .folder import (
    MARKER,
    OutputFolder,
    Record,
    absolute,
    describe,
    files_under,
    is_working,
    kind_of,
    read_marker,
    write_marker,
)

logger = logging.getLogger(__name__)


def _kind_problem(folder: Path, found: str, kind: str, choose: str) -> str | None:
    """Why ``sodkit kind`` may not write into ``folder``, marked with ``found`` (``""``: a
    marker without a kind); None if it may. ``choose`` ends the message: what to do instead."""
    if found == kind or (found == "" and kind == "train"):
        return None
    if found == "":
        return (f"{folder} carries sodkit's marker ({MARKER}) but it does not say which "
                f"command made it (an earlier sodkit, or marked by hand): sodkit train can "
                f"continue it as a training run; for sodkit {kind} {choose}")
    return (f"{folder} is {describe(found)}; sodkit {kind} writes only into folders of its "
            f"own (new, empty, or made by sodkit {kind}), --force or not: {choose}")


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
        write_marker(folder, kind)
        out = OutputFolder(folder, kind, force)
        out.record.start()
        return out
    if info.get("kind") != kind:  # a run marked without a kind: now a train run
        write_marker(folder, kind, info.get("created"))
    out = OutputFolder(folder, kind, force)
    if not out.record.exists():  # an unrecorded file is the user's
        out.record.start()
        count = out.unrecorded()
        if count:
            logger.info("%s was made by an earlier sodkit, which kept no record of its files: "
                        "the %s already there %s left as yours (replaced only when you say "
                        "so, never deleted by --overwrite)", folder, plural(count, "file"),
                        noun_for(count, "is"))
    out.record.compact()
    if kind == "train" and not force:
        out.check_unchanged()
    return out


def removal_problem(folder: str | Path, kind: str) -> str | None:
    """Why ``sodkit kind --overwrite`` may not delete ``folder``; None when it may.

    It may when the folder is of its own kind and every file in it is one that sodkit wrote
    and nobody changed since (or a :data:`WORKING` file of the kind). Marked folders inside
    (a test output in a run) are held to their own record. In a folder without a record (made
    by sodkit 0.2, or a run marked by hand) only the working files are sodkit's: an unrecorded
    file is the user's (a ``notes.txt`` beside the checkpoints).
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
        return (f"{folder} is {describe(found)}; sodkit {kind} --overwrite deletes only its "
                f"own outputs")
    for path in _unproven(folder, found or kind):
        how = ("no record of it: the folder was made by an earlier sodkit" if not
               Record(folder).exists() else "or was changed since")
        return (f"{path} was not written by sodkit {kind} ({how}); move it away, then run "
                f"again")
    return None


def check_removable(folder: Path, output_root: Path, kind: str = "train") -> None:
    """Refuse ``--overwrite`` of anything but a folder of ``kind`` strictly under output_root
    that holds only what sodkit ``kind`` wrote there (:func:`sodkit.outputs.removal_problem`)."""
    folder, root = Path(folder), Path(output_root)
    if not folder.is_symlink():
        resolved, root_resolved = folder.resolve(), root.resolve()
        if resolved == root_resolved or not resolved.is_relative_to(root_resolved):
            raise UserError(f"--overwrite: {folder} does not lie under {root}; nothing deleted")
    problem = removal_problem(folder, kind)
    if problem is not None:
        raise UserError(f"--overwrite: {problem}; nothing deleted")


def remove_run_folder(folder: Path, output_root: Path, kind: str = "train") -> None:
    """Delete a folder for ``--overwrite``: only sodkit's own, of ``kind``, under output_root."""
    check_removable(folder, output_root, kind)
    if Path(folder).exists():
        shutil.rmtree(Path(folder).resolve())


def _unproven(folder: Path, kind: str) -> Iterator[Path]:
    """Files under ``folder`` that its record does not prove (without a record: every file
    but the kind's working files)."""
    record = Record(folder)
    nested: list[Path] = []
    root = absolute(folder)
    for path in files_under(folder, nested):
        rel = absolute(path).relative_to(root).as_posix()
        if not is_working(kind, rel) and not record.proves(rel, path):
            yield path
    for sub in nested:
        yield from _unproven(sub, kind_of(sub) or "")


def single_file(path: str | Path, kind: str, force: bool, what: str,
                inputs: Iterable[Path] = (), flag: str | None = "--force") -> OutputFolder:
    """Where the single file ``path`` (``--latex``, ``--xlsx``, ``report --out``, ``--onnx``) is
    recorded, after checking that ``sodkit kind`` may write it: not an input nor inside an input
    folder (``force`` or not); in a folder of the user's, of ``kind`` or of ``report`` (where
    paper tables and pages go), never in another command's; if it exists, written by sodkit and
    unchanged since, or ``force``. Call again just before writing."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give a file name")
    check_not_input(path, list(inputs), what)
    out = OutputFolder.at(path.parent)
    if out.kind is not None and out.kind not in (kind, "report"):
        either = f", {flag} or not" if flag else ""
        raise UserError(f"{what} {path} lies in {out.root}, {describe(out.kind)}: sodkit {kind} "
                        f"puts no file into another command's folder{either}; write "
                        f"{what} elsewhere")
    out.force, out.flag = force, flag  # flag None: the command has no way to force it
    problem = out.problem(path)
    if problem is not None:
        raise UserError(f"{what} {problem}")
    return out


def write_single(path: str | Path, kind: str, force: bool, what: str,
                 write: Callable[[Path], None]) -> None:
    """Write the single file ``path`` (see :func:`single_file`); a missing folder is created
    as a ``report`` folder (paper tables and pages of any command may go there)."""
    path = Path(path)
    if not path.parent.exists():
        claim(path.parent, "report")
    single_file(path, kind, force, what).write_with(path, write)
    logger.info("wrote %s", path)
