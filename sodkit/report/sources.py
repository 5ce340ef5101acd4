"""Run folders and ``sodkit eval`` outputs read back into one shape for the report.

A training run (or a ``sodkit test`` output) holds ``results.json`` as ``{dataset: metrics}``
for one model, named after the run; a ``sodkit eval`` output holds ``evaluation.json`` naming
a folder per dataset, each with ``results.json`` as ``{method: metrics}``. Both become a
:class:`Source`: ``results[method][dataset][metric]``, ``curves[dataset][method]`` and the
per-image rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .tables import read_per_image_csv
from .training import Series, checkpoint_info, training_scalars


@dataclass
class Source:
    """What one folder contributes to a report."""

    folder: Path
    label: str
    kind: str  # "run" (train / test output) or "eval"
    results: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    curves: dict[str, dict[str, dict[str, list[float]]]] = field(default_factory=dict)
    per_image: list[dict[str, Any]] = field(default_factory=list)
    config: str | None = None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    training: Series = field(default_factory=dict)

    @property
    def datasets(self) -> list[str]:
        seen: list[str] = []
        for per_dataset in self.results.values():
            seen += [d for d in per_dataset if d not in seen]
        return seen


def _json(path: Path) -> Any:
    from ..limits import check_file_size

    check_file_size(path, "result file")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc


def _label(folder: Path) -> str:
    from ..config.yamlio import read_yaml

    config = folder / "config.yaml"
    if config.is_file():
        data = read_yaml(config)  # bounded: a run folder from elsewhere is input
        name = data.get("name") if isinstance(data, dict) else None
        if isinstance(name, str) and name:
            return name
    return folder.resolve().name


def _load_run(folder: Path, source: Source) -> None:
    method = source.label
    for dataset, metrics in _json(folder / "results.json").items():
        source.results.setdefault(method, {})[dataset] = metrics
    curves = folder / "curves.json"
    for dataset, values in (_json(curves) if curves.is_file() else {}).items():
        source.curves.setdefault(dataset, {})[method] = values
    rows = read_per_image_csv(folder / "results_per_image.csv")
    for row in rows:
        row["method"] = row["method"] or method
        for key in ("image", "gt", "prediction"):
            if row[key] and not Path(row[key]).is_absolute():
                row[key] = str(folder / row[key])
    source.per_image = rows
    if (folder / "config.yaml").is_file():
        source.config = (folder / "config.yaml").read_text()
    for path in sorted((folder / "checkpoints").glob("*.pt")):
        info = checkpoint_info(path)
        if info is not None:
            source.checkpoints.append(info)
    source.training = training_scalars(folder)


def _load_eval(folder: Path, source: Source, manifest: dict[str, Any]) -> None:
    from ..paths import inside

    for dataset, sub in manifest.get("datasets", {}).items():
        where = folder if sub == "." else inside(folder, sub)
        for method, metrics in _json(where / "results.json").items():
            source.results.setdefault(method, {})[dataset] = metrics
        curves = where / "curves.json"
        if curves.is_file():
            source.curves[dataset] = _json(curves)
        source.per_image += read_per_image_csv(where / "results_per_image.csv")


def load_source(folder: str | Path) -> Source:
    """Read a run folder or an eval output; a UserError names what is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder (give a run folder or a sodkit eval output)")
    manifest = folder / "evaluation.json"
    if manifest.is_file() and _json(manifest).get("kind") == "eval":
        source = Source(folder, folder.resolve().name, "eval")
        _load_eval(folder, source, _json(manifest))
    elif (folder / "results.json").is_file():
        source = Source(folder, _label(folder), "run")
        _load_run(folder, source)
    else:
        raise UserError(f"{folder} holds no results.json: give a folder written by sodkit "
                        f"train, test or eval")
    return source


def load_sources(folders: list[str | Path]) -> list[Source]:
    """Every folder's source, runs with the same name told apart by their parent folder."""
    sources = [load_source(f) for f in folders]
    names = [s.label for s in sources]
    for source in sources:
        if source.kind == "run" and names.count(source.label) > 1:
            old = source.label
            source.label = f"{source.folder.resolve().parent.name}/{old}"
            source.results = {source.label: source.results.pop(old)}
            for per_method in source.curves.values():
                per_method[source.label] = per_method.pop(old)
            for row in source.per_image:
                row["method"] = source.label if row["method"] == old else row["method"]
    return sources
