"""The cached ONNX graphs by model file, for a start that imports no torch
(:mod:`sodkit.commands.predict_lean`).

A graph's key (:func:`sodkit.runners.onnx_cache.graph_key`) is made from the model file's
config, which only reading the file (torch) gives. So whenever the full path finds or exports a
graph for a model file (:mod:`sodkit.runners.load`), it writes beside the graphs, in
``index.json``, what a later run needs to run that graph without reading the file: keyed by
what can be computed without torch (the file's sha256, memoised by stat; ``--weights`` as
given; the precision; the installed versions), the graph of each input side, the inference
pipeline, the normalisation, the default side and test-time augmentation, and the network's
name for the opening line.

The index is a hint, never the truth: a file sodkit did not write, too large, garbled, or an
entry whose fields are not what they must be, or whose graph is gone, reads as no entry, and
the caller takes the full path. A changed model file has another sha256, so its old entry is
never found; an upgrade changes the versions, likewise. Light: standard library only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..cache import read_cache_json

logger = logging.getLogger(__name__)

FILE = "index.json"
MAX_BYTES = 1 << 20  # a larger file is not sodkit's: ignored
MAX_ENTRIES = 128  # model files; the oldest go first
MAX_SIDES = 16  # graphs of one model file at different sides
PIPELINES = ("sodkit", "minet", "f3net", "birefnet", "birefnet-card")
_GRAPH = re.compile(r"[0-9a-f]{32}\.onnx")


@dataclass(frozen=True)
class Entry:
    """What running a model file's cached graph needs, read back from the index."""

    graph: Path  # the .onnx file, in the cache folder
    size: int  # the input side it runs at
    pipeline: str  # data.preprocess's inference pipeline
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    tta: tuple[str, ...]  # the checkpoint's eval.tta
    name: str  # model.name and model.backbone, for the opening line
    backbone: str


def index_key(sha256: str, weights: str, precision: str, versions: dict[str, str]) -> str:
    """The entry's key: everything besides the side that picks one graph of a model file."""
    text = json.dumps([sha256, weights, precision, versions], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read(folder: Path) -> dict[str, Any]:
    return read_cache_json(folder / FILE, MAX_BYTES)


def remember(folder: Path, key: str, side: int, graph: Path, about: dict[str, Any]) -> None:
    """Add ``graph`` (the graph at ``side``) to the entry ``key``; ``about``: the fields of
    :class:`Entry` besides the graph and side, plus ``default_size``. Never an error: a cache
    that cannot be written is found empty next time."""
    try:
        index = _read(folder)
        entry = index.pop(key, None)
        entry = entry if isinstance(entry, dict) else {}
        graphs = entry.get("graphs") if isinstance(entry.get("graphs"), dict) else {}
        graphs = {str(side): graph.name, **{k: v for k, v in graphs.items() if k != str(side)}}
        index[key] = {**about, "graphs": dict(list(graphs.items())[:MAX_SIDES])}
        kept = dict(list(index.items())[-MAX_ENTRIES:])
        write_atomic(folder / FILE, json.dumps(kept, indent=1) + "\n")
    except Exception as exc:  # noqa: BLE001 - the index only saves time
        logger.debug("could not index the graph %s: %s", graph, exc)


def lookup(folder: Path, key: str, side: int | None) -> Entry | None:
    """The entry ``key`` at ``side`` (None: the model file's default side), or None where
    there is none that can be trusted (see the module's docstring)."""
    entry = _read(folder).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        return _checked(folder, entry, side)
    except (KeyError, TypeError, ValueError):
        return None


def _checked(folder: Path, entry: dict[str, Any], side: int | None) -> Entry | None:
    size = _int(entry["default_size"]) if side is None else side
    name = entry["graphs"][str(size)]
    if not isinstance(name, str) or not _GRAPH.fullmatch(name):
        return None
    graph = folder / name
    if entry["pipeline"] not in PIPELINES or not graph.is_file():
        return None
    tta, std = tuple(entry["tta"]), _triple(entry["std"])
    if any(v <= 0 for v in std):
        return None
    if any(t != "hflip" for t in tta) or not isinstance(entry["name"], str) or not isinstance(
            entry["backbone"], str):
        return None
    return Entry(graph, size, entry["pipeline"], _triple(entry["mean"]), std, tta,
                 entry["name"][:200], entry["backbone"][:200])


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1 << 16:
        raise ValueError(f"not a side: {value!r}")
    return value


def _triple(value: Any) -> tuple[float, float, float]:
    if not isinstance(value, list) or len(value) != 3 or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value):
        raise ValueError(f"not three numbers: {value!r}")
    return (float(value[0]), float(value[1]), float(value[2]))
