"""``sodkit predict --skip-bad``: the images that cannot be read are left out and listed, the
others get their masks (#28). Without it a bad image stops the command, as before.

A decode failure happens in a loader worker; the wrapped dataset turns it into a marker that the
collate function sets aside, so a batch carries its readable images and the names of the
others. Only :class:`~sodkit.errors.DataError` (a file that is no image, truncated, corrupt,
over the size limits) is skipped: anything else is a fault of sodkit or the machine.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError
from ..text import plural

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger(__name__)

SHOWN = 20  # skipped files listed one by one; the rest are counted


class SkipUnreadable:
    """``dataset`` whose unreadable items become ``{"unreadable": (index, message)}`` (a
    map-style dataset, as a DataLoader takes; this module imports no torch, so that the start
    without it, :mod:`sodkit.commands.predict_lean`, shares its messages)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict:
        try:
            return self.dataset[index]
        except DataError as exc:
            return {"unreadable": (index, str(exc))}


def collate_skipping(collate: Callable[[list[dict]], dict]) -> Callable[[list[dict]], dict]:
    """``collate`` of the readable items, with the others' ``(index, message)`` as
    ``batch["unreadable"]`` (a batch of none readable holds that key alone)."""

    def run(items: list[dict]) -> dict:
        readable = [item for item in items if "unreadable" not in item]
        batch = collate(readable) if readable else {}
        batch["unreadable"] = [item["unreadable"] for item in items if "unreadable" in item]
        return batch

    return run


def next_batch(batches: Iterator[dict], skipped: list[tuple[int, str]] | None) -> dict | None:
    """The next batch (None at the end). With ``skipped`` (``--skip-bad``), its readable part
    only (None when it has none) and its unreadable items go to ``skipped``; without, an
    unreadable image is the error it was, which now says that ``--skip-bad`` exists."""
    if skipped is None:
        try:
            return next(batches, None)
        except DataError as exc:
            raise unreadable(exc) from None
    batch = next(batches, None)
    if batch is None:
        return None
    skipped.extend(batch.pop("unreadable", []))
    return batch if batch else None


def unreadable(exc: DataError) -> DataError:
    """An unreadable image's error without ``--skip-bad``, which says that it exists."""
    return DataError(f"{exc} (or give --skip-bad to write the other masks and list the images "
                     f"that cannot be read)")


def report_skipped(runtime: Runtime, skipped: list[tuple[Path, str]]) -> int:
    """Log every rank's skipped images on rank 0 (a collective); returns how many there were
    (on rank 0; 0 elsewhere)."""
    return log_skipped([item for part in runtime.gather_to_main(skipped) or [] for item in part])


def log_skipped(every: list[tuple[Path, str]]) -> int:
    """Log the skipped images ``(path, why)``; returns how many there were."""
    if every:
        lines = "".join(f"\n  {message}" for _, message in every[:SHOWN])
        more = f"\n  ... and {len(every) - SHOWN} more" if len(every) > SHOWN else ""
        logger.warning("--skip-bad: skipped %s that could not be read, no mask written for "
                       "%s:%s%s", plural(len(every), "image"),
                       "it" if len(every) == 1 else "them", lines, more)
    return len(every)
