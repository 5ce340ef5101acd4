"""What a folder given to ``sodkit report`` may make it read: its own files, and the images of
the dataset folders its evaluation recorded; nothing else.

A run folder received from someone else names files in ``results_per_image.csv`` (any path,
absolute or ``../``), and any file in it may be a symbolic link. Followed blindly, a report of
such a folder embeds the reader's own private photo (or quotes a private text file as the
"config") into a page that is then shared. So every path is resolved (links followed) and read
only when it lies inside the folder itself, or, for the gallery's images, inside one of the
input folders the evaluation recorded (``datasets.json`` of a run, ``inputs`` of an
``evaluation.json``) and has an image extension. What is refused is remembered, logged once per
folder and listed on the page. Paths are checked when they are about to be read: a gallery
shows a few images per dataset, and resolving every row of a 5,000-image file would cost more
than the page.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from ..text import plural

logger = logging.getLogger(__name__)

SHOWN = 5  # skipped paths named in the warning line


class Reach:
    """The files one folder of a report may be read from, and the paths it was refused."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.root = self.folder.resolve()
        self.inputs: dict[str, list[Path]] = {}  # dataset -> recorded input folders (resolved)
        self.skipped: list[str] = []

    def own(self, *parts: str) -> Path | None:
        """``folder/parts`` when it exists and lies inside the folder; None when it is missing
        or (noted as skipped) a link out of it."""
        path = self.folder.joinpath(*parts)
        if not path.exists():
            return None
        return self.check_own(path)

    def check_own(self, path: Path) -> Path | None:
        """``path`` (found in the folder) if it resolves inside it, else None (noted)."""
        if path.resolve().is_relative_to(self.root):
            return path
        self.skipped.append(str(path))
        return None

    def record_inputs(self, folders: dict[str, list[str]]) -> None:
        """Allow the images of these input folders (as recorded by the evaluation)."""
        for dataset, listed in folders.items():
            self.inputs[dataset] = [Path(f).expanduser().resolve() for f in listed]

    def image(self, text: str) -> Path | None:
        """The image a per-image row names (relative to the folder or absolute), if it may be
        read; an empty cell is None, a refused one None and noted."""
        from ..imageio import IMAGE_EXTENSIONS

        if not text:
            return None
        path = Path(text) if Path(text).is_absolute() else self.folder / text
        resolved = path.resolve()
        allowed = resolved.is_relative_to(self.root) or any(
            resolved.is_relative_to(folder) for folders in self.inputs.values()
            for folder in folders)
        if allowed and resolved.suffix.lower() in IMAGE_EXTENSIONS:
            return path
        self.skipped.append(text)
        return None

    def outside_folders(self) -> list[str]:
        """The recorded input folders outside this folder (shown on the page)."""
        return sorted({str(f) for folders in self.inputs.values() for f in folders
                       if not f.is_relative_to(self.root)})

    def warn(self) -> None:
        """One warning line for everything refused in this folder (if anything was)."""
        if not self.skipped:
            return
        unique = list(dict.fromkeys(self.skipped))
        more = f" and {len(unique) - SHOWN} more" if len(unique) > SHOWN else ""
        hint = "" if self.inputs else (
            " (the folder records no input folders, as those of an older sodkit: `sodkit test "
            "CONFIG --checkpoint FILE` writes them to datasets.json)")
        logger.warning("%s: %s named in the folder lie outside it and outside the input "
                       "folders its evaluation recorded, and were not read: %s%s%s", self.folder,
                       plural(len(unique), "file"), ", ".join(unique[:SHOWN]), more, hint)


def folders_of(files: Iterable[Path]) -> list[str]:
    """The folders holding ``files``, resolved: what an evaluation records as its inputs
    (``datasets.json``, ``evaluation.json``), so that its report may show their images."""
    return sorted({str(folder.resolve()) for folder in {Path(f).parent for f in files}})
