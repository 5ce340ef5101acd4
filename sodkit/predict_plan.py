"""What ``sodkit predict`` will read and write, checked from names, paths and headers before
the first forward pass (#32: no error after 16 masks were written).

Where each output goes, one PNG per input image and ``--save`` kind:

* ``--out DIR`` and one kind: ``DIR/<stem>.png``, as always (``sodkit eval --pred NAME=DIR``
  reads it);
* ``--out DIR`` and several kinds: ``DIR/<kind>/<stem>.png``, one folder per kind
  (``DIR/mask/``, ``DIR/cutout/``), all from one forward pass;
* ``--out NAME.png`` and one input image: that file (what a rembg user types); several kinds:
  ``NAME.<kind>.png``. A name ending in another image extension is refused (the files are
  PNG), as is a file name for several images.

Checked before any work, each a one-line error: every output name is a file name the system
takes (no control character, at most 255 bytes; all such inputs are listed), no output is an
input or lies in an input folder, the folder to write is one (not a file) and writable, each
input is readable, an image by its first bytes, and within ``SODKIT_MAX_PIXELS`` by its header
(read from the file's first 64 KiB, more only for a JPEG whose header needs it). The sizes
found bound the memory the command will ask for (:mod:`sodkit.commands.predict`). Light
imports only.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import DataError, UserError
from .paths import check_not_input, inside, name_problem

logger = logging.getLogger(__name__)

SHOWN = 5  # bad names listed one by one; the rest are counted
_HEAD = 64 << 10  # bytes read first for a header
FILE_SUFFIX = ".png"


@dataclass(frozen=True)
class Targets:
    """The output path of each input stem and kind."""

    out: Path  # --out as given: the folder, or the one file
    kinds: tuple[str, ...]
    single: bool  # --out names the output file of one image

    @property
    def folder(self) -> Path:
        """The folder the outputs go to (claimed by the command)."""
        return self.out.parent if self.single else self.out

    def path(self, stem: str, kind: str) -> Path:
        if self.single:
            if len(self.kinds) == 1:
                return self.out
            return self.out.with_name(f"{self.out.stem}.{kind}{FILE_SUFFIX}")
        if len(self.kinds) == 1:
            return self.out / f"{stem}{FILE_SUFFIX}"
        return self.out / kind / f"{stem}{FILE_SUFFIX}"

    def where(self) -> str:
        """Where the outputs go, for the log: ``out``, ``out/mask/ and out/cutout/``,
        ``a.png``, ``a.mask.png and a.cutout.png``."""
        if not self.single and len(self.kinds) == 1:
            return str(self.out)
        from .text import and_list

        if self.single:
            return and_list([str(self.path("", kind)) for kind in self.kinds])
        return and_list([f"{self.out / kind}/" for kind in self.kinds])


def plan(out: str | Path, inputs: Sequence[str | Path], paths: Sequence[Path],
         kinds: Sequence[str]) -> Targets:
    """The :class:`Targets` of ``paths`` (the input images, from ``inputs`` as named), every
    name and the folder to write checked (module docstring); nothing is created."""
    out = Path(out)
    single = _names_a_file(out)
    if single:
        if out.suffix.lower() != FILE_SUFFIX:
            raise UserError(f"--out {out}: sodkit predict writes PNG files; name it "
                            f"{out.with_suffix(FILE_SUFFIX).name}, or give a folder")
        if len(paths) != 1:
            raise UserError(f"--out {out} names one file, but {len(paths)} images are given; "
                            f"give a folder for their outputs")
    targets = Targets(out, tuple(kinds), single)
    _check_names(targets, paths)
    every = [targets.path(p.stem, kind) for p in paths for kind in kinds]
    for target in (every if single else [out]):
        check_not_input(target, [Path(p) for p in inputs] + list(paths))
    _check_writable(targets.folder)
    return targets


def _names_a_file(out: Path) -> bool:
    """``--out`` names an output file: an image name, not an existing folder."""
    from .imageio import IMAGE_EXTENSIONS

    return out.suffix.lower() in IMAGE_EXTENSIONS and not out.is_dir()


def _check_names(targets: Targets, paths: Sequence[Path]) -> None:
    bad = []
    for path in paths:
        for kind in targets.kinds:
            problem = name_problem(targets.path(path.stem, kind).name)
            if problem is not None:
                bad.append(f"{str(path)!r} ({problem})")  # repr: one line whatever the name
                break
    if bad:
        listed = "; ".join(bad[:SHOWN]) + (f"; and {len(bad) - SHOWN} more" if len(bad) > SHOWN
                                          else "")
        raise UserError(f"{len(bad)} input image{'s' if len(bad) > 1 else ''} cannot name "
                        f"{'their' if len(bad) > 1 else 'its'} output file: {listed}; rename "
                        f"{'them' if len(bad) > 1 else 'it'} (nothing was written)")


def _check_writable(folder: Path) -> None:
    """The output folder, or its nearest existing parent, is a folder this process may write
    in (else the first mask would fail, after the first forward pass)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise UserError(f"--out {folder}: {existing} is a file, not a folder")
    if existing.exists() and not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"--out {folder}: no permission to write in {existing}")


def resolve(targets: Targets, paths: Sequence[Path]) -> list[dict[str, Path]]:
    """Each input's output paths by kind, each checked to resolve inside the output folder
    (:func:`sodkit.paths.inside`: a link cannot send a mask elsewhere)."""
    if targets.single:
        return [{kind: targets.path(paths[0].stem, kind) for kind in targets.kinds}]
    sub = len(targets.kinds) > 1
    return [{kind: inside(targets.out, *([kind] if sub else []), targets.path(p.stem, kind).name)
             for kind in targets.kinds} for p in paths]


def declared_size(path: Path) -> tuple[int, int]:
    """``(height, width)`` of an image as its header declares them (before the EXIF
    orientation: the pixels are what matter here), from its first 64 KiB (the whole file for
    a JPEG whose header segments are larger); checked against ``SODKIT_MAX_PIXELS``.

    Raises:
        DataError: the file cannot be read, is no image, or declares too many pixels.
    """
    from .imageio import _png_size, _undecodable, read_header, sniff_format
    from .limits import check_pixels, read_file

    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEAD)
    except OSError as exc:
        raise DataError(f"cannot read image file {path}: {exc.strerror or exc}") from None
    if sniff_format(head[:16]) is None:
        import numpy as np

        raise _undecodable(path, np.frombuffer(head, dtype=np.uint8))
    size = _png_size(head)
    if size is None:
        header = read_header(head, path)
        if header is None and len(head) == _HEAD:  # the header goes on past the first bytes
            header = read_header(read_file(path), path)
        if header is None:
            raise DataError(f"cannot read the header of {path}: not a valid "
                            f"{sniff_format(head[:16])} file; replace or remove it")
        size = header[:2]
    check_pixels(path, *size)
    return size[1], size[0]


def input_sizes(paths: Sequence[Path], skip_bad: bool) -> dict[Path, tuple[int, int]]:
    """:func:`declared_size` of each input; a bad one stops the command (naming it and
    ``--skip-bad``) or, with ``skip_bad``, is left to the decoding, which lists it."""
    sizes = {}
    for path in paths:
        try:
            sizes[path] = declared_size(path)
        except DataError as exc:
            if not skip_bad:
                raise DataError(f"{exc} (or give --skip-bad to write the other images' "
                                f"outputs and list the images that cannot be read)") from None
    return sizes


def collect_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Image and video files named directly, and images found in named folders (not
    recursive; a folder's videos are said and left out), stems unique."""
    from .imageio import IMAGE_EXTENSIONS
    from .text import noun_for, plural
    from .video import is_video

    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            found = sorted(p for p in item.iterdir()
                           if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            videos = sum(1 for p in item.iterdir() if p.is_file() and is_video(p))
            if not found:
                raise UserError(f"no images ({', '.join(IMAGE_EXTENSIONS)}) in folder {item}"
                                + (f"; the {plural(videos, 'video')} there "
                                   f"{noun_for(videos, 'is')} predicted only when named "
                                   f"(sodkit predict {item / 'NAME.mp4'})" if videos else ""))
            if videos:
                logger.info("%s: %s left out (a folder gives its images; name a video to "
                            "predict it)", item, plural(videos, "video"))
            files.extend(found)
        elif item.is_file():
            files.append(item)
        else:
            raise UserError(f"input not found: {item}")
    by_stem: dict[str, Path] = {}
    for path in files:
        if path.stem in by_stem and by_stem[path.stem] != path:
            raise UserError(f"two inputs would write {path.stem}.png: {by_stem[path.stem]} and "
                            f"{path}; predict them into different --out folders")
        by_stem[path.stem] = path
    return list(by_stem.values())
