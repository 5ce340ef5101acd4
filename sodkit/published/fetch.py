"""A model name -> the cached model file: fetched, verified and converted once, then offline.

:func:`fetch_model` is the one way from a name to a file, for every command (``predict
--model``, ``test --model``, ``train NAME``, ``models --fetch``, a server) and the API
(``sodkit.load("NAME")``). The cache, under :func:`sodkit.cache.cache_dir`::

    models/NAME.safetensors     the sodkit model file (what every later use reads, offline)
    models/NAME.json            its record: the source's URL, size and sha256 (from the
                                catalogue, or recorded on the first download), the model file's
    models/downloads/NAME/FILE  the authors' file while it downloads (FILE.part) or waits for
                                conversion; removed once converted
    models/.locks/NAME.lock     one process fetches a name at a time (torchrun's ranks wait)

The downloaded file is checked against the catalogue's size and sha256; a mismatch deletes it
and says so, and it is never read. Without a published sha256 the first download's is
recorded (trust on first use, said in the log) and every later download of the name must
match it. Conversion is ``import-weights``' (no pickle beyond torch's weights-only reader, no
code from the download is run). ``SODKIT_OFFLINE=1``, or a network that fails, ends in one
line naming the URL to fetch and where to put the file; a file put there is then verified and
converted without the network.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserError
from .catalogue import SODKIT_FORMAT, Entry, get_entry, looks_like_name

logger = logging.getLogger(__name__)

OFFLINE_ENV = "SODKIT_OFFLINE"
WAIT_NOTICE_S = 1.0  # a process that waits longer for another's fetch says so


@dataclass(frozen=True)
class CachePaths:
    """Where one model's files live in the cache."""

    model: Path
    record: Path
    source: Path
    part: Path
    lock: Path


def cache_paths(entry: Entry) -> CachePaths:
    from ..cache import cache_dir

    root = cache_dir() / "models"
    source = root / "downloads" / entry.name / entry.file
    return CachePaths(model=root / f"{entry.name}.safetensors", record=root / f"{entry.name}.json",
                      source=source, part=source.with_name(source.name + ".part"),
                      lock=root / ".locks" / f"{entry.name}.lock")


def offline() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def read_record(path: Path) -> dict[str, Any]:
    """A model's record, or {} when there is none or it is damaged (then it is rebuilt)."""
    try:
        record = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        logger.warning("%s is damaged; the model is fetched and recorded again", path)
        return {}
    return record if isinstance(record, dict) else {}


def cached(entry: Entry) -> Path | None:
    """The model file when it is cached whole (a record of it, its size as recorded, and the
    source the catalogue names now); None otherwise."""
    paths = cache_paths(entry)
    record = read_record(paths.record)
    if not paths.model.is_file() or record.get("model_size") != paths.model.stat().st_size:
        return None
    if entry.sha256 and record.get("source_sha256") != entry.sha256:
        return None  # the catalogue names another file now: fetch it
    return paths.model


def fetch_model(name: str) -> Path:
    """The cached model file of ``name``, fetched, verified and converted first when needed.

    Raises:
        UserError: an unknown name, a file that is not the one named (deleted, never read),
            offline or unreachable (one line: the URL and where to put the file).
    """
    entry = get_entry(name)
    found = cached(entry)
    if found is not None:
        return found
    paths = cache_paths(entry)
    for folder in (paths.source.parent, paths.lock.parent):
        folder.mkdir(parents=True, exist_ok=True)
    lock = _acquire(paths.lock, entry.name)
    try:
        found = cached(entry)  # another process may have fetched it meanwhile
        if found is not None:
            return found
        record = read_record(paths.record)
        source, digest = _verified_source(entry, paths, record)
        size = source.stat().st_size
        _convert(entry, source, paths.model)
        _write_record(entry, paths, record, digest, size)
        source.unlink()
        _tidy(paths)
        logger.info("%s: cached as %s (later uses read it offline)", entry.name, paths.model)
    finally:
        lock.release()
    return paths.model


def _acquire(path: Path, name: str) -> Any:
    """The name's file lock, held; a process that must wait for another's fetch says so."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=WAIT_NOTICE_S)
    except Timeout:
        logger.info("%s: another process is fetching it; waiting (lock %s)", name, path)
        lock.acquire()
    return lock


def _tidy(paths: CachePaths) -> None:
    """The model's download folder, removed once it is empty."""
    try:
        paths.source.parent.rmdir()
    except OSError:
        pass  # not empty, or gone


def _expected(entry: Entry, record: dict[str, Any]) -> tuple[str | None, int | None, str]:
    """The sha256 and size the file must have, and where they come from (for messages)."""
    if entry.sha256:
        return entry.sha256, entry.size, f"the catalogue ({entry.origin})"
    sha, size = record.get("source_sha256"), record.get("source_size")
    if isinstance(sha, str) and isinstance(size, int):
        return sha, size, f"recorded on its first download, {record.get('recorded', '?')}"
    return None, entry.size, ""


def _verified_source(entry: Entry, paths: CachePaths, record: dict[str, Any]
                     ) -> tuple[Path, str]:
    """The authors' file at ``paths.source``, downloaded unless it is there, checked."""
    from ..limits import max_file_bytes
    from .download import NetworkError, discard, download

    sha, size, origin = _expected(entry, record)
    if not paths.source.is_file():
        if offline() or entry.url is None:
            raise UserError(_by_hand(entry, paths, "SODKIT_OFFLINE=1 keeps sodkit off the "
                                     "network" if entry.url else None))
        logger.info("%s: downloading %s (%s) to %s", entry.name, entry.url,
                    f"{size / 1e6:.1f} MB" if size else "size not published", paths.part)
        try:
            download(entry.url, paths.part, size, max_file_bytes(), entry.name)
        except NetworkError as exc:
            raise UserError(_by_hand(entry, paths, str(exc))) from None
        except UserError:
            _tidy(paths)
            raise
        paths.part.replace(paths.source)
        discard(paths.part)  # its validator
    digest = _check(entry, paths.source, sha, size, origin)
    return paths.source, digest


def _by_hand(entry: Entry, paths: CachePaths, why: str | None) -> str:
    if entry.url is None:
        return (f"{entry.name} is not cached and its authors publish it only behind a page: "
                f"download {entry.file} from {entry.page} and put it at {paths.source}, then run "
                f"again")
    return (f"{entry.name} is not cached ({why}): download {entry.url} and put it at "
            f"{paths.source}, then run again")


def _check(entry: Entry, source: Path, sha: str | None, size: int | None, origin: str) -> str:
    """The file's sha256, after checking it (and its size) against what is expected; a
    mismatch deletes the file."""
    from ..model_file import file_sha256
    from .download import discard

    held = source.stat().st_size
    digest = file_sha256(source)
    wrong = (size is not None and held != size) or (sha is not None and digest != sha)
    if wrong:
        discard(source)
        discard(source.with_name(source.name + ".part"))
        _tidy(cache_paths(entry))
        expected = f"sha256 {sha}" if sha else ""
        expected += f"{', ' if sha else ''}{size} bytes" if size is not None else ""
        hint = ("the release may have changed since; if you trust the new file, delete "
                f"{cache_paths(entry).record} and run again" if "first download" in origin else
                "another file was served (a proxy's page, a changed release, a wrong "
                "SODKIT_MIRROR); run again to fetch it anew")
        raise UserError(f"{entry.name}: {source.name} from {entry.url or entry.page} is not the "
                        f"file expected: sha256 {digest}, {held} bytes; expected {expected} "
                        f"({origin}). It was deleted and not loaded; {hint}")
    return digest


def _convert(entry: Entry, source: Path, out: Path) -> None:
    """``source`` (verified) -> the sodkit model file ``out``, written whole or not at all."""
    if entry.format == SODKIT_FORMAT:
        from ..atomic import atomic_target
        from ..model_file import read_model_file

        read_model_file(source)  # a sodkit model file, or a one-line refusal
        with atomic_target(out) as tmp:
            tmp.write_bytes(source.read_bytes())
        return
    from .convert import import_weights
    from .formats import RECIPES, get_format

    release = get_format(entry.format)
    recipe = RECIPES / entry.recipe if entry.recipe else None
    data = {k: v for k, v in (("size", entry.inference.get("size")),
                              ("preprocess", entry.inference.get("preprocess"))) if v}
    try:
        import_weights(release, source, out, recipe, data=data,
                       about={"model": entry.name, "url": entry.original_url or entry.url})
    except UserError as exc:  # not that release after all: never kept, never recorded
        source.unlink(missing_ok=True)
        _tidy(cache_paths(entry))
        raise UserError(f"{entry.name}: {exc}; the downloaded file was deleted") from None


def _write_record(entry: Entry, paths: CachePaths, old: dict[str, Any], digest: str,
                  size: int) -> None:
    from ..atomic import write_atomic

    first = not entry.sha256 and not old.get("source_sha256")
    recorded = old.get("recorded") if not entry.sha256 and old.get("recorded") else \
        time.strftime("%Y-%m-%d %H:%M:%S")
    record = {"name": entry.name, "url": entry.url, "source_file": entry.file,
              "source_size": size, "source_sha256": digest,
              "sha256_from": "catalogue" if entry.sha256 else "first download",
              "recorded": recorded, "model_size": paths.model.stat().st_size}
    write_atomic(paths.record, (json.dumps(record, indent=2) + "\n").encode())
    if first:
        logger.warning("%s: the catalogue publishes no sha256 for it, so this first download's "
                       "is recorded (trust on first use): sha256 %s, %d bytes, in %s; every later "
                       "download of %s must match it", entry.name, digest, size, paths.record,
                       entry.name)


def model_source(text: str | Path) -> Path:
    """What a user gave as a model: an existing file (a checkpoint or model file) as it is, else
    a model name from the catalogue, fetched (a path that does not exist stays a path, for the
    caller's own "not found")."""
    from .catalogue import entries

    path = Path(text).expanduser()
    if path.exists() or not looks_like_name(str(text)):
        return path
    if str(text) not in entries():
        try:
            get_entry(str(text))
        except UserError as exc:
            raise UserError(f"no file {str(text)!r} here, and {exc}") from None
    return fetch_model(str(text))
