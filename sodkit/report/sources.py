"""Run folders and ``sodkit eval`` outputs read back into one shape for the report.

A training run (or a ``sodkit test`` output) holds ``results.json`` as ``{dataset: metrics}``
for one model, named after the run; a ``sodkit eval`` output holds ``evaluation.json`` naming
a folder per dataset, each with ``results.json`` as ``{method: metrics}``. Both become a
:class:`Source`: ``results[method][dataset][metric]``, ``curves[dataset][method]`` and the
per-image rows.

Every file is read through the folder's :class:`~sodkit.report.confine.Reach` (nothing outside
the folder, see there) and checked for its shape (:mod:`sodkit.report.inputs`). A method name
that two folders share (a run named like a method of an eval output, two eval outputs of the
same methods) is shown as ``name@folder`` in every row, with a warning line saying so, so that
no folder's numbers silently replace another's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .confine import Reach
from .inputs import curves_table, eval_manifest, folder_lists, metrics_table, read_json, run_config
from .tables import read_per_image_csv
from .training import Series, checkpoint_info, training_scalars

logger = logging.getLogger(__name__)


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
    reach: Reach | None = None
    renamed: dict[str, str] = field(default_factory=dict)  # method -> name shown
    start: dict[str, dict[str, float]] = field(default_factory=dict)  # eval.at_start's numbers
    ci: dict[str, dict[str, Any]] = field(default_factory=dict)  # eval --ci: dataset -> ci.json

    def __post_init__(self) -> None:
        if self.reach is None:
            self.reach = Reach(self.folder)

    @property
    def datasets(self) -> list[str]:
        seen: list[str] = []
        for per_dataset in self.results.values():
            seen += [d for d in per_dataset if d not in seen]
        return seen


def _label(reach: Reach) -> str:
    config = reach.own("config.yaml")
    if config is not None:
        name = run_config(config).get("name")
        if isinstance(name, str) and name:
            return name
    return reach.root.name


def _load_run(source: Source) -> None:
    reach, method = source.reach, source.label
    for dataset, metrics in metrics_table(reach.own("results.json")).items():
        source.results.setdefault(method, {})[dataset] = metrics
    curves = reach.own("curves.json")
    for dataset, values in (curves_table(curves) if curves else {}).items():
        source.curves.setdefault(dataset, {})[method] = values
    start = reach.own("results_start.json")  # eval.at_start: the starting model (epoch 0)
    source.start = metrics_table(start) if start else {}
    table = reach.own("results_per_image.csv")
    source.per_image = read_per_image_csv(table) if table else []
    for row in source.per_image:
        row["method"] = row["method"] or method
    recorded = reach.own("datasets.json")
    if recorded is not None:
        reach.record_inputs(folder_lists(recorded, read_json(recorded), "the file"))
    config = reach.own("config.yaml")
    if config is not None:
        source.config = config.read_text(encoding="utf-8", errors="replace")
    for path in sorted((source.folder / "checkpoints").glob("*.pt")):
        info = checkpoint_info(path) if reach.check_own(path) else None
        if info is not None:
            source.checkpoints.append(info)
    source.training = training_scalars(source.folder, reach)


def _load_eval(source: Source, manifest: dict[str, Any], path: Path) -> None:
    from ..paths import name_problem

    reach = source.reach
    reach.record_inputs(folder_lists(path, manifest.get("inputs", {}), "'inputs'"))
    for dataset, sub in manifest.get("datasets", {}).items():
        if sub != "." and name_problem(sub) is not None:
            raise UserError(f"{path}: datasets.{dataset} names {sub!r}, not a sub-folder of "
                            f"{source.folder}; it is damaged or was not written by sodkit")
        parts = () if sub == "." else (sub,)
        results = reach.own(*parts, "results.json")
        if results is None:
            raise UserError(f"{path} lists dataset {dataset!r} in {source.folder / sub}, which "
                            f"holds no results.json")
        for method, metrics in metrics_table(results).items():
            source.results.setdefault(method, {})[dataset] = metrics
        curves = reach.own(*parts, "curves.json")
        if curves is not None:
            source.curves[dataset] = curves_table(curves)
        table = reach.own(*parts, "results_per_image.csv")
        source.per_image += read_per_image_csv(table) if table else []
        ci = reach.own(*parts, "ci.json")
        if ci is not None:
            from .intervals import read_ci, stale

            document = read_ci(ci)
            if stale(document, metrics_table(results)):
                logger.warning("%s: its values differ from results.json beside it (an "
                               "evaluation without --ci replaced the results since?): its "
                               "intervals are not shown", ci)
            else:
                source.ci[dataset] = document


def load_source(folder: str | Path) -> Source:
    """Read a run folder or an eval output; a UserError names what is missing or damaged."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder (give a run folder or a sodkit eval output)")
    reach = Reach(folder)
    manifest_path = reach.own("evaluation.json")
    manifest = eval_manifest(manifest_path) if manifest_path else None
    if manifest is not None and manifest.get("kind") == "eval":
        source = Source(folder, reach.root.name, "eval", reach=reach)
        _load_eval(source, manifest, manifest_path)
    elif reach.own("results.json") is not None:
        source = Source(folder, _label(reach), "run", reach=reach)
        _load_run(source)
    else:
        raise UserError(f"{folder} holds no results.json: give a folder written by sodkit "
                        f"train, test or eval")
    return source


def _tags(holders: list[Source]) -> list[str]:
    """Short distinct names of folders: their names, else more of their paths, else numbers."""
    for depth in (1, 2, 3):
        tags = ["/".join(s.reach.root.parts[-depth:]) for s in holders]
        if len(set(tags)) == len(tags):
            return tags
    return [f"{tag} ({i + 1})" for i, tag in enumerate(tags)]


def _rename(source: Source, old: str, new: str) -> None:
    source.results = {new if m == old else m: v for m, v in source.results.items()}
    for per_method in source.curves.values():
        if old in per_method:
            per_method[new] = per_method.pop(old)
    for row in source.per_image:
        row["method"] = new if row["method"] == old else row["method"]
    if source.kind == "run" and source.label == old:
        source.label = new
    source.renamed[old] = new


def tell_apart(sources: list[Source]) -> None:
    """Rename every method that several folders hold to ``name@folder``, with a warning."""
    holders: dict[str, list[Source]] = {}
    for source in sources:
        for method in source.results:
            holders.setdefault(method, []).append(source)
    taken = set(holders)
    for method, owners in holders.items():
        if len(owners) < 2:
            continue
        names = [f"{method}@{tag}" for tag in _tags(owners)]
        names = [name if name not in taken else f"{name} ({i + 1})"
                 for i, name in enumerate(names)]
        for source, name in zip(owners, names, strict=True):
            _rename(source, method, name)
        pairs = ", ".join(f"{name} ({s.folder})" for s, name in zip(owners, names, strict=True))
        logger.warning("method %r is in %d folders; shown as %s", method, len(owners), pairs)


def load_sources(folders: list[str | Path]) -> list[Source]:
    """Every folder's source; methods of the same name in several folders told apart."""
    sources = [load_source(f) for f in folders]
    tell_apart(sources)
    return sources
