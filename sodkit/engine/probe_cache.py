"""The memory probe's answer for a model file, remembered: ``sodkit predict`` at a high input
side runs the network twice on a small image before its first forward pass to choose the batch
(:mod:`sodkit.engine.batch_memory`); BiRefNet Swin-T at 1024 px spent 5-20 s of its start on it
on this 2-core machine (a 128 px forward pays most of a forward's fixed costs), for an answer
that depends only on the network, the input side and the software. The next run with the same
file reads it back instead (benchmarks/startup.py).

The key names the file by its resolved path, size, modification time and inode (a file
replaced or rewritten is another file; no hash of gigabytes at each start), with the input
side, device type, TTA, precision and the versions of torch and sodkit. The answers live in
one small JSON file in the cache folder (:func:`sodkit.cache.cache_dir`), written whole or not
at all; a file that is not what sodkit writes (damaged, too large, values out of range) is
ignored and replaced. Only the CPU's answers are kept: a GPU's probe is one pass, and its
memory depends on the card.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..cache import cache_dir, read_cache_json

logger = logging.getLogger(__name__)

FILE = "memory-probes.json"
MAX_ENTRIES = 64  # the oldest answers go first
MAX_BYTES = 64 << 10  # a larger file is not sodkit's: ignored
MAX_PER_IMAGE = 1 << 50  # bytes: a larger answer is not a probe's


def probe_key(source: Path, size: int, device: str, tta: tuple[str, ...], precision: str
              ) -> str | None:
    """The key of a probe of the model file ``source``; None where it cannot be named."""
    from importlib.metadata import version

    from ..version import __version__

    try:
        stat = source.resolve().stat()
    except OSError:
        return None
    return "|".join(map(str, (source.resolve(), stat.st_size, stat.st_mtime_ns, stat.st_ino,
                              size, device, ",".join(tta), precision, version("torch"),
                              __version__)))


def _path() -> Path:
    return cache_dir() / FILE


def _read() -> dict[str, int]:
    entries = read_cache_json(_path(), MAX_BYTES)
    return {key: value for key, value in entries.items()
            if isinstance(key, str) and type(value) is int and 0 < value <= MAX_PER_IMAGE}


def recall(key: str | None) -> int | None:
    """The bytes per image a probe under ``key`` measured, or None."""
    return _read().get(key) if key else None


def remember(key: str | None, per_image: int | None) -> None:
    """Keep ``per_image`` under ``key`` (nothing where either is None or the cache folder
    cannot be written: the next run probes again)."""
    if not key or not per_image or per_image > MAX_PER_IMAGE:
        return
    from ..atomic import write_atomic

    entries = {k: v for k, v in _read().items() if k != key}
    entries[key] = per_image
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    try:
        os.makedirs(_path().parent, exist_ok=True)
        write_atomic(_path(), json.dumps(kept, indent=0).encode())
    except Exception as exc:  # noqa: BLE001  (a cache: never the command's failure)
        logger.debug("memory probe not remembered: %s", exc)
