"""What a run folder says about its training, read without torch.

* Loss terms and learning rates: from the TensorBoard event files (``tb/``, read with
  TensorBoard's own ``EventAccumulator``), or, when there are none, from ``train.log``'s
  periodic lines (``... step 8/8 loss 0.91 (bce 0.52 iou 0.39) lr 2.00e-03 ...``). An event
  file with a damaged record header is skipped with a warning (:func:`event_file_damage`).
* A checkpoint's epoch, step and best: a ``.pt`` file is a zip whose ``data.pkl`` is a pickle;
  it is read by an unpickler that builds plain dicts and inert stand-ins and never calls a
  global the file names, so no code in the file can run (and torch is not needed).
* Where a fine-tuned run started: its checkpoints' ``model.init_from`` record, as a sentence
  (:func:`describe_init`, which the trainer's log uses too).
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
from .confine import Reach

logger = logging.getLogger(__name__)

MAX_RECORD = 64 * 2**20  # the largest record a cut-off event file may claim (images are < 1 MB)

Series = dict[str, list[tuple[int, float]]]  # tag -> [(step, value)]
_LOG_LINE = re.compile(r"step (\d+)/\d+ loss (\S+) \(([^)]*)\) lr (\S+)")


def training_scalars(folder: Path, reach: Reach | None = None) -> Series:
    """``loss/<term>`` and ``lr/<group>`` series of a run folder ({} when it has neither).

    Files that resolve outside the folder are not read (``reach``); a damaged event file is
    skipped with one warning line, and when no event file can be read the curves come from
    ``train.log``.
    """
    reach = reach or Reach(folder)
    tb = folder / "tb"
    events = [p for p in sorted(tb.glob("events.out.tfevents.*")) if reach.check_own(p)]
    series: Series = {}
    if events:
        series, problem = _from_events(events)
        if problem:
            fallback = "; the curves come from train.log" if not series else ""
            logger.warning("%s: %s%s", tb, problem, fallback)
    log = reach.own("train.log")
    if not series and log is not None:
        return _from_log(log)
    return series


def event_file_damage(path: Path) -> str | None:
    """Why TensorBoard's reader must not be given ``path``; None when every record's header is
    whole. The reader allocates the length a record's header claims before it reads the
    record, so 16 damaged bytes claiming a terabyte end in a MemoryError; here each header's
    checksum and length are checked against the file's size first (a cut-off last record of
    at most :data:`MAX_RECORD` bytes, as a killed writer leaves, is accepted)."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    size, offset = path.stat().st_size, 0
    with open(path, "rb") as handle:
        while offset < size:
            header = handle.read(12)
            if len(header) < 12:
                return None  # a cut-off header: the reader stops there
            length, checksum = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != checksum:
                return f"the record at byte {offset} is damaged"
            offset += 16 + length
            if offset > size and length > MAX_RECORD:
                return f"the record at byte {offset - 16 - length} claims {length} bytes"
            handle.seek(offset)
    return None


def _from_events(files: list[Path]) -> tuple[Series, str | None]:
    """The scalars of the event files that are whole, and what was wrong with the others."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    damaged = {path: event_file_damage(path) for path in files}
    good = [path for path, why in damaged.items() if why is None]
    problems = [f"{path.name}: {why}" for path, why in damaged.items() if why is not None]
    quiet = logging.getLogger("tensorboard")  # "No path found after ..." at the end of the files
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    series: Series = {}
    try:
        # One accumulator over the folder orders the files and applies purges across them;
        # when some are left out, each other file is read on its own.
        whole = good and good == sorted(good[0].parent.glob("events.out.tfevents.*"))
        targets = [good[0].parent] if whole else good
        for target in targets:
            acc = EventAccumulator(str(target), size_guidance={"scalars": 0, "images": 1,
                                                               "tensors": 1})
            acc.Reload()
            tags = [t for t in acc.Tags().get("scalars", []) if t.startswith(("loss/", "lr/"))]
            for tag in tags:
                by_step = dict(series.get(tag, []))
                by_step.update({event.step: float(event.value) for event in acc.Scalars(tag)})
                series[tag] = sorted(by_step.items())  # a resume records steps again
    except Exception as exc:  # not an event file after all: the page draws without it
        problems.append(f"cannot read the events ({exc.__class__.__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''})")
        series = {}
    finally:
        quiet.setLevel(level)
    return series, ("; ".join(problems) + ", skipped") if problems else None


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
    """``{"file", "epoch", "step", "best", "init"}`` of a sodkit checkpoint; None if
    unreadable."""
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
    init = state.get("init") if isinstance(state.get("init"), dict) else None  # init_from
    return {"file": path.name, "epoch": state.get("epoch"), "step": state.get("step"),
            "best": best, "init": init}


def describe_init(record: dict[str, Any], past: bool = False) -> str:
    """A fine-tuned run's ``model.init_from`` record (:mod:`sodkit.engine.init_from`, kept in its
    checkpoints) as one sentence: the trainer's log and the report, which reads it from a
    checkpoint of any origin (every value is shown as text, whatever its type); ``past``: as a
    resumed run says what its start did."""
    which = {"ema": ", its EMA weights", "model": ", its model weights"}.get(
        str(record.get("weights")), "")
    exclude = record.get("exclude")
    under = ", ".join(map(str, exclude)) if isinstance(exclude, list) else str(exclude)
    were, was = (" were", " was") if past else ("", "")
    fresh = (f"{record.get('fresh')} tensors{were} left at their fresh initialisation (under "
             f"{under})" if record.get("fresh") else
             f"nothing{was} left at its fresh initialisation")
    return (f"{record.get('loaded')} tensors{were} loaded from {record.get('file')} "
            f"({record.get('kind')}{which}; sha256 {record.get('sha256')}); {fresh}")
