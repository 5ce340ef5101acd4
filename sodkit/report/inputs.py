"""The files of a run folder or ``sodkit eval`` output, read back and checked for their shape.

A folder given to ``sodkit report`` may come from someone else, so nothing in it is trusted:
each file is read only when it lies inside the folder (symbolic links resolved, see
:class:`sodkit.report.confine.Reach`), and a file that is not what sodkit writes (invalid JSON,
a list where a mapping belongs, text where a number belongs) is a :class:`UserError` naming the
file and what to do, never a traceback from deep in the page builder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import UserError

Metrics = dict[str, float]


def _damaged(path: Path, what: str) -> UserError:
    return UserError(f"{path}: {what}; it is damaged or was not written by sodkit. Move it "
                     f"out of the folder (or re-create it with sodkit test / eval) and run the "
                     f"report again")


def read_json(path: Path) -> Any:
    """The JSON document of ``path``; a one-line UserError if it is unreadable, larger than
    the file size limit (``sodkit.limits``) or not JSON."""
    from ..limits import check_file_size

    check_file_size(path, "result file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise _damaged(path, f"not valid JSON ({exc})") from None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mapping(value: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _damaged(path, f"{where} should be a mapping, found {type(value).__name__}")
    return value


def metrics_table(path: Path) -> dict[str, Metrics]:
    """``results.json``: ``{row: {metric: number}}`` (rows are datasets or methods)."""
    table = _mapping(read_json(path), path, "the file")
    for row, values in table.items():
        for metric, value in _mapping(values, path, f"entry {row!r}").items():
            if not _number(value):
                raise _damaged(path, f"{row}.{metric} should be a number, found {value!r}")
    return {row: {m: float(v) for m, v in values.items()} for row, values in table.items()}


def curves_table(path: Path) -> dict[str, dict[str, list[float]]]:
    """``curves.json``: ``{label: {curve name: [numbers]}}``."""
    table = _mapping(read_json(path), path, "the file")
    for label, curves in table.items():
        for name, values in _mapping(curves, path, f"entry {label!r}").items():
            if not isinstance(values, list) or not all(_number(v) for v in values):
                raise _damaged(path, f"{label}.{name} should be a list of numbers")
    return table


def folder_lists(path: Path, value: Any, where: str) -> dict[str, list[str]]:
    """``{dataset: [folder, ...]}`` of recorded input folders: ``datasets.json`` of a run holds
    ``{dataset: {"images": [folder], "masks": [folder]}}``, the ``inputs`` of an
    ``evaluation.json`` ``{dataset: [folder, ...]}``."""
    folders: dict[str, list[str]] = {}
    for key, entry in _mapping(value, path, where).items():
        parts = list(entry.values()) if isinstance(entry, dict) else [entry]
        listed = [f for part in parts for f in (part if isinstance(part, list) else [part])]
        if not all(isinstance(f, str) for f in listed):
            raise _damaged(path, f"{where} {key!r} should list folders")
        folders[str(key)] = listed
    return folders


def eval_manifest(path: Path) -> dict[str, Any]:
    """``evaluation.json`` of ``sodkit eval``: ``kind``, ``datasets`` ``{dataset: sub-folder}``
    and ``inputs`` (outputs of an older sodkit have none)."""
    manifest = _mapping(read_json(path), path, "the file")
    datasets = _mapping(manifest.get("datasets", {}), path, "'datasets'")
    for dataset, sub in datasets.items():
        if not isinstance(sub, str):
            raise _damaged(path, f"datasets.{dataset} should name a sub-folder")
    folder_lists(path, manifest.get("inputs", {}), "'inputs'")
    return manifest


def run_config(path: Path) -> dict[str, Any]:
    """A run's ``config.yaml`` as a mapping (YAML's safe loader, its size and alias expansion
    bounded: a run folder from elsewhere is input)."""
    from ..config.yamlio import load_yaml
    from ..limits import check_file_size

    check_file_size(path, "config")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    try:
        data = load_yaml(text, str(path))
    except UserError as exc:
        raise _damaged(path, " ".join(str(exc).split()).removeprefix(f"{path}: ")) from None
    return _mapping(data or {}, path, "the file")

