"""Where sodkit may write: names that stay names, and folders that sodkit owns.

Every name that becomes part of a path (run names, dataset names, method names, image stems)
goes through :func:`check_name`, so a typo such as ``name=..`` is a config error instead of a
path that points at the user's working directory. As a second line of defence, :func:`inside`
resolves each path sodkit writes and checks that it still lies in the folder it belongs to.

Folders that sodkit creates for its outputs carry a marker file (:data:`MARKER`); sodkit deletes
a folder only when it carries the marker and lies under the configured ``output_root``, and it
writes into an existing non-empty folder only when that folder carries the marker (or the user
says ``--force``). Light imports only: ``sodkit eval`` uses this without torch.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from . import __version__
from .errors import UserError

MARKER = ".sodkit-run"  # written into every output folder sodkit creates
MAX_NAME_BYTES = 255  # the longest file name common file systems accept
_DRIVE = re.compile(r"^[A-Za-z]:")


def name_problem(value: object) -> str | None:
    """Why ``value`` is not a single, portable path component; None when it is one."""
    if not isinstance(value, str) or not value:
        return "it is empty"
    if value in (".", ".."):
        return f"{value!r} names a folder relative to where it is used"
    if "/" in value or "\\" in value:
        return "it contains a path separator"
    if _DRIVE.match(value):
        return "it starts with a drive letter"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "it contains a control character"
    if len(value.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def check_name(value: object, key: str, example: str = "my_run",
               error: type[UserError] = UserError) -> str:
    """``value`` if it is a single path component, else ``error`` naming ``key``.

    Args:
        value: the name as the user (or a dataset folder) gave it.
        key: where it came from, shown to the user (``name``, ``data.test.0.name``, ``--pred``).
        example: a valid value shown in the message.
        error: the UserError subclass to raise (config code raises ConfigError).
    """
    problem = name_problem(value)
    if problem is not None:
        raise error(f"{key}: {value!r} is not a valid name ({problem}); a name is one "
                        f"folder or file name without '/', '\\', '..' or control characters, "
                        f"e.g. {key}={example}")
    return value  # type: ignore[return-value]


def is_inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies in ``folder`` (both resolved, symbolic links followed)."""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


def inside(folder: Path, *parts: str) -> Path:
    """``folder / parts...`` after checking that each part is a name and the result stays inside.

    The last part may carry an extension (``stem.png``); a part that is not a single name, or a
    result that a symbolic link sends elsewhere, is a UserError naming the path.
    """
    path = Path(folder)
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            raise UserError(f"refusing to write {path / str(part)}: {part!r} is not a single "
                            f"file or folder name ({problem})")
        path = path / part
    if not is_inside(path, folder):
        raise UserError(f"refusing to write {path}: it resolves to {path.resolve()}, outside "
                        f"{Path(folder).resolve()}")
    return path


def is_owned(folder: Path) -> bool:
    """Whether ``folder`` carries sodkit's marker, i.e. sodkit created it."""
    return (Path(folder) / MARKER).is_file()


def _is_empty(folder: Path) -> bool:
    return not any(folder.iterdir())


def claim_folder(folder: Path, kind: str, force: bool = False) -> Path:
    """Make ``folder`` an output folder of sodkit's, creating it with the marker if needed.

    An existing folder is accepted when it is empty (the marker is added), when it carries the
    marker already, or with ``force`` (nothing is deleted; files of the names sodkit writes are
    replaced). Anything else is a UserError that says what was found and what to do.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder; choose a folder for the output")
    if folder.is_dir() and not is_owned(folder):
        if not _is_empty(folder) and not force:
            raise UserError(
                f"{folder} already holds files and was not created by sodkit (no {MARKER} "
                f"marker); choose a new or empty folder, or pass --force to write into it "
                f"anyway (only files of the names sodkit writes are replaced, nothing is deleted)"
            )
        if not _is_empty(folder):
            return folder  # forced into a user's folder: never mark it as sodkit's own
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / MARKER
    if not marker.exists():
        info = {"sodkit": __version__, "kind": kind,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        marker.write_text(json.dumps(info) + "\n")
    return folder


def check_removable(folder: Path, output_root: Path) -> None:
    """Refuse ``--overwrite`` of anything but a marked sodkit folder strictly under output_root."""
    folder, root = Path(folder), Path(output_root)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        kind = "symbolic link" if folder.is_symlink() else "file"
        raise UserError(f"--overwrite: {folder} is a {kind}, not a run folder sodkit created; "
                        f"nothing deleted")
    resolved, root_resolved = folder.resolve(), root.resolve()
    if resolved == root_resolved or not resolved.is_relative_to(root_resolved):
        raise UserError(f"--overwrite: {folder} does not lie under output_root {root}; "
                        f"nothing deleted")
    if folder.exists() and not is_owned(folder):
        raise UserError(
            f"--overwrite: {folder} was not created by sodkit (no {MARKER} marker), so it is "
            f"not deleted; choose another name=..., or move the folder away yourself (a run "
            f"folder of sodkit before 0.2 has no marker: delete it by hand if you mean to)"
        )


def remove_run_folder(folder: Path, output_root: Path) -> None:
    """Delete a folder for ``--overwrite``: only sodkit's own, and only under output_root."""
    check_removable(folder, output_root)
    if Path(folder).exists():
        shutil.rmtree(Path(folder).resolve())


def check_not_input(out: Path, inputs: list[Path], what: str = "--out") -> None:
    """Refuse an output folder that is, or holds, one of the inputs (files or folders)."""
    out_resolved = Path(out).resolve()
    for item in inputs:
        item_resolved = Path(item).resolve()
        if item_resolved == out_resolved or item_resolved.is_relative_to(out_resolved):
            raise UserError(f"{what} {out} holds the input {item}: writing there could replace "
                            f"your inputs; choose an output folder outside the inputs")


def resolved_files(paths: Iterable[Path]) -> list[str]:
    """``str(path.resolve())`` of each file, each folder resolved once (a file that is itself a
    link is resolved on its own): resolving 2,000 files one by one took 0.1 s."""
    folders: dict[Path, Path] = {}
    resolved = []
    for path in paths:
        if path.is_symlink():
            resolved.append(str(path.resolve()))
            continue
        if path.parent not in folders:
            folders[path.parent] = path.parent.resolve()
        resolved.append(str(folders[path.parent] / path.name))
    return resolved
