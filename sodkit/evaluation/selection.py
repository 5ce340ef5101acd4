"""Which methods, datasets and images ``sodkit eval`` measures: ``--include-*`` / ``--exclude-*``,
``--list`` and ``--allow-missing`` (the selection PySODEvalToolkit users have, #25).

* ``--include-methods`` / ``--exclude-methods`` / ``--include-datasets`` /
  ``--exclude-datasets`` take comma-separated names; a name that matches nothing is an error
  naming the known ones (a typo must not silently evaluate everything): the rule of
  :mod:`sodkit.include_exclude`, which ``sodkit report`` shares.
* ``--list [NAME=]FILE`` keeps the GT stems a text file lists (one a line; a path or a file name
  is cut to its stem, so a dataset's ``test.lst`` works as it is). The file comes from anywhere:
  its size is bounded before it is read, it must be UTF-8 text, and each stem is checked (no
  control characters, no ``.`` / ``..``, at most 255 characters); the error names the line.
* ``--allow-missing`` evaluates each method on the GT stems it has predictions for, with a
  warning giving the counts, and skips a method that lacks a whole dataset with one line.
  Without it a missing prediction stays an error (comparing methods on different images is a
  choice the user makes). Each method's images keep their dataset index, so the records of a
  method with gaps merge as exactly as full ones (``measure.measure``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError, UserError
from ..text import noun_for, plural

if TYPE_CHECKING:
    from .job import Job
    from .methods import Method

logger = logging.getLogger(__name__)

MAX_LIST_BYTES = 32 << 20  # 32 MiB: a million stems of 30 characters
MAX_STEM = 255  # a file name's limit on common file systems
_COMMENT = "#"


def _line_stem(line: str) -> str:
    """A line's stem: its first field, cut to the file name, without an image extension."""
    from ..imageio import IMAGE_EXTENSIONS

    token = line.split()[0]
    name = token.replace("\\", "/").rsplit("/", 1)[-1]
    root, extension = os.path.splitext(name)
    return root if extension.lower() in IMAGE_EXTENSIONS else name


def read_stem_list(path: Path) -> list[str]:
    """The stems a ``--list`` file names, in file order, each once.

    Raises:
        UserError: the file is missing, larger than :data:`MAX_LIST_BYTES`, not UTF-8 text, or
            a line names no usable stem (the line's number in the message).
    """
    where = f"--list {path}"
    try:
        size = path.stat().st_size
        if size > MAX_LIST_BYTES:
            raise UserError(f"{where}: {size} bytes, more than a list of stems needs "
                            f"({MAX_LIST_BYTES >> 20} MiB at most)")
        with open(path, "rb") as handle:
            data = handle.read(MAX_LIST_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserError(f"{where}: line {line} is not UTF-8 text; give a text file of stems"
                        ) from None
    stems: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith(_COMMENT):
            continue
        stem = _line_stem(line)
        bad = any(ord(c) < 32 or ord(c) == 127 for c in stem)
        if bad or stem in ("", ".", "..") or len(stem) > MAX_STEM:
            raise UserError(f"{where}: line {number} names no file stem: {line[:60]!r}")
        stems[stem] = None
    if not stems:
        raise UserError(f"{where}: lists no stem (one a line; '#' starts a comment)")
    return list(stems)


def stem_lists(specs: Sequence[str], datasets: Sequence[str], several: bool,
               split: Callable[[str, str], tuple[str | None, Path]],
               namings: dict[str, tuple[str, str]] | None = None) -> dict[str, list[str]]:
    """``{dataset: listed stems}`` from the ``--list`` options (datasets without a list are
    evaluated whole).

    Args:
        specs: the ``--list`` values, ``[NAME=]FILE``.
        datasets: the datasets evaluated (after ``--include/--exclude-datasets``).
        several: whether several ``--gt`` were given (then each list must be named).
        split: ``plan.split_spec``.
        namings: a dataset's GT prefix and suffix (``--datasets``), taken off listed names.
    """
    from .toolkit import named_stem

    lists: dict[str, list[str]] = {}
    for spec in specs:
        name, file = split(spec, "list")
        if name is None:
            if several:
                raise UserError(f"--list {spec}: with several --gt, name the dataset it lists: "
                                f"--list NAME=FILE")
            name = datasets[0]
        if name in lists:
            raise UserError(f"--list: two lists for dataset {name}")
        if name in datasets:
            naming = (namings or {}).get(name)
            lists[name] = list(dict.fromkeys(named_stem(stem, naming)
                                             for stem in read_stem_list(file)))
        else:
            logger.warning("--list %s: dataset %s is not evaluated; list ignored", spec, name)
    return lists


def keep_listed(files: dict[str, Path], listed: Sequence[str] | None, dataset: str,
                shorten: Callable[[list[str]], str]) -> dict[str, Path]:
    """The GT files of the listed stems (all of them without a list).

    Raises:
        DataError: a listed stem has no GT file.
    """
    if listed is None:
        return files
    missing = [stem for stem in listed if stem not in files]
    if missing:
        raise DataError(f"--list: {len(missing)} listed stem(s) have no GT in dataset {dataset}: "
                        f"{shorten(missing)}")
    logger.info("dataset %s: %d of %d GT images listed by --list", dataset, len(listed),
                len(files))
    return {stem: files[stem] for stem in sorted(listed)}


def pair_method(job: Job, method: Method, dataset: str | None, allow_missing: bool,
                shorten: Callable[[Sequence[str]], str], match: Callable[..., Any] | None = None
                ) -> None:
    """``job.preds[method]``: the prediction of each GT stem; with ``allow_missing``, of the
    stems the method has (a warning gives the counts), and a method without the dataset is
    left out with one line. Without it a missing prediction is an error listing the stems.

    Args:
        dataset: the ``--gt`` name (None: a single unnamed GT folder).
        shorten: ``plan.listed`` (stems, shortened).
        match: how a folder's files match the stems (default ``methods.match_files``;
            ``--groups``: ``groups.group_matcher``).
    """
    from .methods import match_files

    match = match or match_files
    naming = method.for_dataset(dataset)
    if naming is None:  # its PySODEvalToolkit file names no such dataset: "no results"
        logger.info("method %r: its file names no dataset %s; not evaluated there",
                    method.name, job.name)
        return None
    if allow_missing and not naming.folder.is_dir():
        return skip_method(method.name, job.name, naming.folder, "no folder")
    found, extra = match(naming, set(job.gts), method.name)
    missing = job.gts.keys() - found.keys()
    if missing and allow_missing:
        if not found:
            return skip_method(method.name, job.name, naming.folder, "no prediction")
        warn_partial(method.name, job.name, len(found), len(job.gts))
    elif missing:
        wrapped = (f" (named {naming.prefix}<stem>{naming.suffix})"
                   if naming.prefix or naming.suffix else "")
        raise DataError(f"method {method.name!r}: {len(missing)} of "
                        f"{plural(len(job.gts), 'prediction')} "
                        f"missing in {naming.folder}{wrapped}: {shorten(missing)} "
                        f"(--allow-missing evaluates the others)")
    if extra:
        logger.warning("method %r: %s in %s %s no GT and %s ignored: %s", method.name,
                       plural(len(extra), "prediction"), naming.folder,
                       noun_for(len(extra), "has"), noun_for(len(extra), "is"), shorten(extra))
    job.preds[method.name] = {stem: found[stem] for stem in job.gts if stem in found}
    return None


def skip_method(method: str, dataset: str, folder: Path, why: str) -> None:
    """The one line saying a method is left out of a dataset (``--allow-missing``)."""
    logger.warning("method %r: %s for dataset %s in %s; skipped there (--allow-missing)",
                   method, why, dataset, folder)


def warn_partial(method: str, dataset: str, found: int, total: int) -> None:
    """The warning of a method evaluated on the stems it has (``--allow-missing``)."""
    logger.warning("method %r: %d of %d predictions missing for dataset %s; evaluated on the "
                   "%d it has (--allow-missing)", method, total - found, total, dataset, found)
