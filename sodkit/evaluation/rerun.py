"""``sodkit eval`` run again into its own folder: nothing dropped or left stale without a word.

An ``--out`` folder holds one evaluation: running again with fewer methods (or datasets)
replaced the earlier 3-method results with 1-method ones, silently, and a LaTeX table written
from them was then out of date without a sign. sodkit does not append (PySODEvalToolkit does):
an earlier method measured on other images or other predictions would sit in one table beside
numbers it cannot be compared with. Instead:

* before any image is measured, one warning line names each method and dataset the folder held
  that this evaluation leaves out (they are dropped from its results);
* ``evaluation.json`` records each paper table (``--latex``, ``--xlsx``) written from the folder
  with a digest of the numbers it shows and the file's SHA-256; an evaluation that changes those
  numbers and does not rewrite the table says that the table is out of date and how to rewrite
  it, again at every later run until the table is rewritten (by ``eval``, ``report`` or by hand:
  a file whose bytes changed since is no longer eval's to watch).

Tables that ``sodkit report`` wrote from the folder are not known here (the report writes
nothing into its inputs): rewrite them after a new evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from .job import Job
    from .request import EvalRequest

logger = logging.getLogger(__name__)

Comparison = Mapping[str, Mapping[str, Mapping[str, float]]]  # method -> dataset -> metrics
MAX_TABLE_BYTES = 64 << 20  # a paper table is kilobytes; a larger file is not one we wrote


@dataclass
class Earlier:
    """What the folder held: ``{dataset: [methods]}`` and the tables written from it."""

    methods: dict[str, list[str]] = field(default_factory=dict)
    tables: dict[str, dict[str, str]] = field(default_factory=dict)  # path -> digest, sha256


def read_earlier(out: Path) -> Earlier | None:
    """The earlier evaluation in ``out`` (None: there is none). Its files are input like any
    other: bounded, shape-checked, nothing read outside ``out``; a damaged one is replaced,
    with a line saying so."""
    from ..paths import inside
    from ..report.inputs import eval_manifest, read_json

    manifest_path = out / "evaluation.json"
    if not manifest_path.is_file():
        return None
    try:
        manifest = eval_manifest(manifest_path)
        earlier = Earlier(tables=_tables(manifest.get("tables", {})))
        for dataset, sub in manifest.get("datasets", {}).items():
            results = inside(out, sub, "results.json") if sub != "." else out / "results.json"
            held = read_json(results) if results.is_file() else {}
            earlier.methods[str(dataset)] = [str(m) for m in held] if isinstance(
                held, dict) else []
    except UserError as exc:
        logger.warning("--out %s: the earlier evaluation there cannot be read (%s); it is "
                       "replaced", out, exc)
        return None
    return earlier


def _tables(value: Any) -> dict[str, dict[str, str]]:
    if not isinstance(value, dict):
        return {}
    return {path: {"digest": entry["digest"], "sha256": entry["sha256"]}
            for path, entry in value.items()
            if isinstance(path, str) and path.isprintable() and isinstance(entry, dict)
            and all(isinstance(entry.get(k), str) for k in ("digest", "sha256"))}


def _unchanged(path: Path, sha256: str) -> bool:
    """Whether the table at ``path`` (a name read from a file: maybe anything) is a regular
    file of a table's size that still has the bytes recorded."""
    from ..outputs.folder import sha256_file

    try:
        return (path.is_file() and path.stat().st_size <= MAX_TABLE_BYTES
                and sha256_file(path) == sha256)
    except OSError:
        return False


def warn_dropped(out: Path, earlier: Earlier | None, jobs: Sequence[Job]) -> None:
    """One line naming what the folder held that this evaluation leaves out."""
    if earlier is None:
        return
    planned = {job.name: set(job.preds) for job in jobs}
    dropped = {dataset: [m for m in methods if m not in planned.get(dataset, ())]
               for dataset, methods in earlier.methods.items()}
    parts = [f"{', '.join(map(_shown, methods))} on {_shown(dataset)}"
             for dataset, methods in dropped.items() if methods]
    if parts:
        logger.warning("--out %s held results of %s, which this evaluation leaves out: they are "
                       "dropped from its results (one evaluation a folder; evaluate every "
                       "method again in one command, or give another --out)", out,
                       "; ".join(parts))


def _shown(name: str) -> str:
    """A name read from a file, as text that cannot steer a terminal."""
    return name if name.isprintable() else repr(name)


def digest(comparison: Comparison) -> str:
    """A digest of the numbers a paper table shows."""
    text = json.dumps(comparison, sort_keys=True, allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tables_after(out: Path, earlier: Earlier | None, comparison: Comparison,
                 request: EvalRequest) -> dict[str, dict[str, str]]:
    """The tables to record in ``evaluation.json`` (after they are written): this run's, and
    the earlier ones unchanged on disk, each with the digest of the numbers it shows; a line
    for each earlier one whose numbers this evaluation changed."""
    from ..outputs.folder import sha256_file

    now = digest(comparison)
    tables = {}
    for flag in ("latex", "xlsx"):
        if getattr(request, flag):
            path = Path(getattr(request, flag)).resolve()
            tables[str(path)] = {"digest": now, "sha256": sha256_file(path)}
    for path, entry in (earlier.tables if earlier else {}).items():
        if path in tables or not _unchanged(Path(path), entry["sha256"]):
            continue  # rewritten now, gone, or rewritten since by someone else
        tables[path] = entry
        if entry["digest"] != now:
            option = "--xlsx" if path.endswith(".xlsx") else "--latex"
            logger.warning("%s shows results that %s no longer holds (it was written "
                           "before an evaluation that changed them): the table is out of date; "
                           "rewrite it (this command with %s %s, or sodkit report %s %s %s)",
                           path, out, option, path, out, option, path)
    return tables
