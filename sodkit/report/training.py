"""What a run folder says about its training, read without torch.

* Loss terms and learning rates: from the TensorBoard event files (``tb/``, read with
  TensorBoard's own ``EventAccumulator``), or, when there are none, from ``train.log``'s
  periodic lines (``... step 8/8 loss 0.91 (bce 0.52 iou 0.39) lr 2.00e-03 ...``).
* A checkpoint's epoch, step and best: a ``.pt`` file is a zip whose ``data.pkl`` is a pickle;
  it is read by an unpickler that builds plain dicts and inert stand-ins and never calls a
  global the file names, so no code in the file can run (and torch is not needed).
"""

from __future__ import annotations

import logging
import pickle
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

from ..limits import check_file_size, check_unpacked_size

logger = logging.getLogger(__name__)

Series = dict[str, list[tuple[int, float]]]  # tag -> [(step, value)]
_LOG_LINE = re.compile(r"step (\d+)/\d+ loss (\S+) \(([^)]*)\) lr (\S+)")


def training_scalars(folder: Path) -> Series:
    """``loss/<term>`` and ``lr/<group>`` series of a run folder ({} when it has neither)."""
    tb = folder / "tb"
    if tb.is_dir() and any(tb.glob("events.out.tfevents.*")):
        series = _from_events(tb)
        if series:
            return series
    log = folder / "train.log"
    return _from_log(log) if log.is_file() else {}


def _from_events(tb: Path) -> Series:
    files = sorted(tb.glob("events.out.tfevents.*"))
    readable = [path for path in files if _records_fit(path)]
    by_tag: dict[str, dict[int, float]] = {}
    for source in [tb] if len(readable) == len(files) else readable:
        for tag, events in _scalar_events(source).items():
            by_tag.setdefault(tag, {}).update((e.step, float(e.value)) for e in events)  # resumes
    return {tag: sorted(by_step.items()) for tag, by_step in by_tag.items()}


def _scalar_events(source: Path) -> dict[str, list[Any]]:
    """The ``loss/`` and ``lr/`` scalar events of an event file or a folder of them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(source), size_guidance={"scalars": 0, "images": 1, "tensors": 1})
    quiet = logging.getLogger("tensorboard")  # "No path found after ..." at the end of the files
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        acc.Reload()
    finally:
        quiet.setLevel(level)
    tags = [t for t in acc.Tags().get("scalars", []) if t.startswith(("loss/", "lr/"))]
    return {tag: acc.Scalars(tag) for tag in tags}


def _records_fit(path: Path) -> bool:
    """Whether no record of an event file declares more bytes than the file holds: TensorBoard
    allocates what a record's 8-byte length says (a 124-byte file saying 8 GiB ended the
    report in a MemoryError). Reads the 12-byte record headers only; warns about a bad file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            position = 0
            while position + 12 <= size:
                handle.seek(position)
                length = struct.unpack("<Q", handle.read(8))[0]
                if length > size:
                    logger.warning("skipping %s: a record declares %d bytes, more than the file "
                                   "holds (%d); damaged or crafted", path, length, size)
                    return False
                position += 16 + length
    except OSError as exc:
        logger.warning("skipping %s: %s", path, exc.strerror or exc)
        return False
    return True


def _from_log(log: Path) -> Series:
    check_file_size(log, "log")
    series: Series = {}
    for line in log.read_text(errors="replace").splitlines():
        match = _LOG_LINE.search(line)
        if not match:
            continue
        step = int(match.group(1))
        values = {"loss/loss": match.group(2), "lr/lr": match.group(4)}
        words = match.group(3).split()
        values.update({f"loss/{k}": v for k, v in zip(words[::2], words[1::2], strict=False)})
        for tag, text in values.items():
            try:
                series.setdefault(tag, []).append((step, float(text)))
            except ValueError:
                continue
    return series


class _Inert:
    """Stands in for every object a checkpoint's pickle names (tensors, storages, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


class _Dict(dict):
    """``collections.OrderedDict`` (state dicts); a subclass so that attributes can be set."""


class _Peek(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _Dict if (module, name) == ("collections", "OrderedDict") else _Inert

    def persistent_load(self, pid: Any) -> Any:
        return None  # tensor data stays in the zip, unread


def checkpoint_info(path: Path) -> dict[str, Any] | None:
    """``{"file", "epoch", "step", "best"}`` of a sodkit checkpoint; None if unreadable."""
    try:
        check_unpacked_size(path)  # a zip bomb would be inflated whole by the read below
        with zipfile.ZipFile(path) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
            with archive.open(name) as handle:
                state = _Peek(handle).load()
    except Exception as exc:  # not a zip checkpoint, truncated, ...: the report says so
        logger.warning("cannot read epoch/step of %s: %s", path, exc)
        return None
    if not isinstance(state, dict):
        return None
    best = state.get("best") if isinstance(state.get("best"), dict) else None
    return {"file": path.name, "epoch": state.get("epoch"), "step": state.get("step"),
            "best": best}
