"""The plan of a folder evaluation: every dataset and method of the request found, paired and
checked before any image is measured (a refusal costs nothing), and every folder it reads.

Predictions pair with GTs by file stem, wrapped in an optional prefix / suffix per method and
dataset (:mod:`.methods`); PySODEvalToolkit's JSON files become entries of the request
(:mod:`.toolkit`); ``--include-*`` / ``--list`` / ``--allow-missing`` select (:mod:`.selection`),
``--groups`` keys frames by group (:mod:`.groups`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DataError, UserError

if TYPE_CHECKING:
    from .job import Job
    from .methods import Method
    from .request import EvalRequest

logger = logging.getLogger(__name__)

SHOWN_STEMS = 10  # stems listed in an error or warning message


def split_spec(spec: str, what: str) -> tuple[str | None, Path]:
    from ..output_names import check_dataset_name
    from ..paths import check_name

    name, sep, path = spec.partition("=")
    if not sep:
        return None, Path(spec)
    if not name or not path:
        raise UserError(f"--{what} {spec!r}: expected NAME=DIR or DIR")
    check = check_dataset_name if what == "gt" else check_name  # a dataset is a sub-folder
    return check(name, f"--{what} {spec!r}: NAME", "ours"), Path(path)


def _default_name(folder: Path, what: str) -> str:
    """A method is named after its folder; a dataset after its GT folder, or the folder above
    when that says what it holds rather than which dataset (``data/ECSSD/Mask``: ECSSD)."""
    from ..folder_names import dataset_name
    from ..paths import check_name

    name = dataset_name(folder) if what == "gt" else folder.resolve().name
    checked = check_name(name, f"--{what} {folder} (the folder's name)", "ours")
    if what == "gt":
        logger.info("dataset %s: the GT folder %s (--gt NAME=DIR names it otherwise)", checked,
                    folder)
    return checked


def listed(stems: Iterable[str]) -> str:
    stems = sorted(stems)
    more = f" and {len(stems) - SHOWN_STEMS} more" if len(stems) > SHOWN_STEMS else ""
    return ", ".join(stems[:SHOWN_STEMS]) + more


def _methods(request: EvalRequest) -> list[Method]:
    """Methods from --pred (with --pred-prefix / --pred-suffix) and --methods."""
    from .methods import Method, Naming, read_methods_file, split_pattern, wrap

    methods = []
    for spec in request.pred:
        name, rest = split_spec(spec, "pred")
        folder, pattern = split_pattern(str(rest), "--pred")
        prefix, suffix = wrap(pattern, request.pred_prefix, request.pred_suffix)
        methods.append(Method(name or _default_name(folder, "pred"),
                              Naming(folder, prefix, suffix)))
    for file in request.method_files:
        methods += read_methods_file(Path(file))
    if not methods:
        raise UserError("name at least one method: --pred NAME=DIR or --methods FILE")
    names = [m.name for m in methods]
    for name in names:
        if names.count(name) > 1:
            raise UserError(f"two predictions named {name!r}; name them with --pred NAME=DIR")
    return methods


def gt_folders(request: EvalRequest) -> list[Path]:
    return [folder for _, folder in (split_spec(spec, "gt") for spec in request.gt)]


def input_folders(request: EvalRequest, methods: list[Method]) -> list[Path]:
    """Every folder eval reads: GT, image and every method's prediction folders."""
    folders = gt_folders(request) + [split_spec(spec, "images")[1] for spec in request.images]
    for method in methods:
        own = [] if method.only_listed else [method.naming.folder]  # a toolkit file: none
        folders += [*own, *(n.folder for n in method.datasets.values())]
    return folders


def _families(request: EvalRequest) -> tuple[str, ...]:
    """The ``--compute`` selection, refused in one line when a name is unknown or a family's
    package is missing; and ``--metrics`` may not ask for a family's key it leaves out."""
    from ..metrics.families import FAMILIES, family_keys, resolve

    try:
        families = resolve(request.compute, images=bool(request.images))  # all: CCM with images
    except ValueError as exc:
        raise UserError(f"--compute: {exc}") from None
    asked = [m.strip() for m in request.metrics.split(",")]
    missing = [m for m in asked if m in family_keys() and m not in family_keys(families)]
    if missing and (request.latex or request.xlsx):
        owners = [name for name in FAMILIES if set(FAMILIES[name].keys) & set(missing)]
        raise UserError(f"--metrics {','.join(missing)}: computed only with --compute "
                        f"{','.join(owners)}")
    return families


def plan(request: EvalRequest) -> tuple[list[Job], list[Path]]:
    """Datasets and methods of the request, every pair checked before any is measured;
    also every input folder (for the checks of what may be written)."""
    from ..include_exclude import select
    from ..paths import check_not_input, inside
    from .groups import check_group_options, group_matcher, list_groups
    from .images import assign_images
    from .intervals import check_resampled, options
    from .job import Job
    from .selection import keep_listed, pair_method, stem_lists
    from .toolkit import add_datasets_file, list_named
    from .trimaps import assign_trimaps

    add_datasets_file(request)  # PySODEvalToolkit's dataset JSON: --gt, --images, --list
    families = _families(request)
    gts = [split_spec(spec, "gt") for spec in request.gt]
    named = [name is not None for name, _ in gts]
    if not all(named) and (any(named) or len(gts) > 1):
        raise UserError("with several --gt, name each one: --gt NAME=DIR")
    if len({name for name, _ in gts}) < len(gts):
        raise UserError("two --gt share a name; give each dataset its own NAME")
    methods = _methods(request)
    inputs = input_folders(request, methods)  # every folder named, selected or not
    names = [name or _default_name(folder, "gt") for name, folder in gts]
    kept = select(names, request.include_datasets, request.exclude_datasets, "datasets")
    gts = [gt for gt, name in zip(gts, names, strict=True) if name in kept]
    kept_methods = select([m.name for m in methods], request.include_methods,
                          request.exclude_methods, "methods")
    methods = [m for m in methods if m.name in kept_methods]
    lists = stem_lists(request.stem_list, kept, len(request.gt) > 1, split_spec, request.gt_namings)
    check_group_options(request, families)
    ci = options(request, [method.name for method in methods])
    out = Path(request.out)
    jobs = []
    for (name, folder), label in zip(gts, kept, strict=True):
        files, match = list_named(folder, *request.gt_namings.get(label, ("", ""))), None
        if request.groups:
            files, every = list_groups(folder, request.frames)
            match = group_matcher(every)
        if not files:
            raise DataError(f"no images in GT folder {folder}")
        files = keep_listed(files, lists.get(label), label, listed)
        job = Job(label, inside(out, name) if name else out, files, families=families, ci=ci,
                  curves=request.curves, groups=request.groups)
        for method in methods:
            pair_method(job, method, name, request.allow_missing, listed, match)
        if ci is not None:
            check_resampled(job, ci)
        if job.preds:
            jobs.append(job)
        else:
            logger.warning("dataset %s: no method has predictions for it; skipped", label)
    if not jobs:
        raise DataError("no method has predictions for any dataset: nothing to evaluate")
    assign_images(request, jobs, families, split_spec, listed)
    assign_trimaps(request, jobs, families, split_spec)
    check_not_input(out, inputs)  # after the inputs are found: a missing one is named first
    return jobs, inputs


