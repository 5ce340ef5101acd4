"""``sodkit eval``: measure saved predictions of any number of methods against GT folders.

Predictions pair with GTs by file stem, wrapped in an optional prefix / suffix per method and
dataset (``methods``). A prediction of another size than its GT is resized to the GT's
size with bilinear interpolation on the uint8 map, as PySODEvalToolkit does, so the numbers equal
that toolkit's. Besides the tables and curves it writes ``curves.json`` and
``results_per_image.csv`` (read by ``sodkit report``), ``evaluation.json`` (which folder holds
which dataset) and, on request, LaTeX / xlsx paper tables. Heavy imports (OpenCV, matplotlib)
stay inside ``run``; torch is imported only under ``torchrun``, where each process measures a
shard of every dataset and rank 0 merges and writes (``ranks``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import int_in, user_path
from ..errors import DataError, UserError

if TYPE_CHECKING:
    from ..evaluation.files import DeferredFolder
    from ..evaluation.job import Job
    from ..evaluation.log import Clock
    from ..evaluation.methods import Method
    from ..evaluation.pool import MeasurePool
    from ..evaluation.ranks import EvalGroup
    from ..metrics import SODMetrics

HELP = "evaluate saved predictions of one or more methods against GT masks (tables + curves)"

logger = logging.getLogger(__name__)

SHOWN_STEMS = 10  # stems listed in an error or warning message


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..evaluation.intervals import add_arguments as add_ci_arguments
    from ..evaluation.selection import add_selection_arguments
    from ..evaluation.toolkit import add_arguments as add_file_arguments
    from ..report.curve_kinds import DEFAULT_KINDS, KINDS, parse_kinds
    from ..report.publish import add_table_arguments

    parser.add_argument(
        "--gt", action="append", default=[], metavar="[NAME=]DIR",
        help="GT mask folder; repeat as NAME=DIR for several datasets, whose predictions are "
             "then read from <pred DIR>/NAME/ (or name them in a --datasets file)")
    parser.add_argument(
        "--pred", action="append", default=[], metavar="[NAME=]DIR[:SUFFIX]",
        help="a method's prediction folder (NAME defaults to the folder's name); repeatable. "
             "DIR:SUFFIX reads <stem>SUFFIX.<ext> (e.g. preds/MINet:_sal), "
             "DIR:PREFIX{stem}SUFFIX both")
    add_file_arguments(parser)  # --methods, --datasets
    parser.add_argument("--pred-prefix", default="",
                        help="prediction file names start with this before the GT stem")
    parser.add_argument("--pred-suffix", default="",
                        help="prediction file names end with this after the GT stem, e.g. _sal "
                             "for <stem>_sal.png (may end with an extension: _sal.png)")
    parser.add_argument("--out", required=True, type=user_path, help="folder for results.{json,"
                        "md,csv}, pr.png, fm.png (a sub-folder per named dataset)")
    parser.add_argument("--force", action="store_true",
                        help="replace files that sodkit eval did not write, or that were changed "
                             "since (only files of the names it writes), in --out and as "
                             "--latex / --xlsx; never in another command's folder or an input")
    parser.add_argument("--compute", default="", metavar="FAMILY,...",
                        help="optional metric families to compute as well: MSE, HCE, SI, MSIoU, "
                             "BIoU, mBA, CM, CCM, matting, or all (default: the standard set "
                             "only; see the README's Metrics)")
    parser.add_argument("--images", action="append", default=[], metavar="[NAME=]DIR",
                        help="a dataset's RGB images (by GT stem), read by --compute CCM; "
                             "repeat as NAME=DIR per --gt NAME")
    parser.add_argument("--trimaps", action="append", default=[], metavar="[NAME=]DIR",
                        help="a dataset's trimaps (0 / 128 / 255, by GT stem): --compute "
                             "matting then measures their unknown (128) pixels only; repeat as "
                             "NAME=DIR per --gt NAME")
    parser.add_argument("--workers", type=int_in(1), default=None,
                        help="processes measuring images (default: the cores of this process, "
                             "from 64 images on; under torchrun the machine's cores shared "
                             "among its processes); 1 measures in this process")
    add_ci_arguments(parser)
    parser.add_argument("--curves", type=parse_kinds, default=DEFAULT_KINDS, metavar="KIND,...",
                        help=f"curve plots per dataset, <KIND>.png: {', '.join(KINDS)} or all "
                             f"(default {','.join(DEFAULT_KINDS)}); curves.json holds them all")
    add_table_arguments(parser)
    add_selection_arguments(parser)


def _split(spec: str, what: str) -> tuple[str | None, Path]:
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


def _listed(stems: Iterable[str]) -> str:
    stems = sorted(stems)
    more = f" and {len(stems) - SHOWN_STEMS} more" if len(stems) > SHOWN_STEMS else ""
    return ", ".join(stems[:SHOWN_STEMS]) + more


def _methods(args: argparse.Namespace) -> list[Method]:
    """Methods from --pred (with --pred-prefix / --pred-suffix) and --methods."""
    from ..evaluation.methods import Method, Naming, read_methods_file, split_pattern, wrap

    methods = []
    for spec in args.pred:
        name, rest = _split(spec, "pred")
        folder, pattern = split_pattern(str(rest), "--pred")
        prefix, suffix = wrap(pattern, args.pred_prefix, args.pred_suffix)
        methods.append(Method(name or _default_name(folder, "pred"),
                              Naming(folder, prefix, suffix)))
    for file in args.methods:
        methods += read_methods_file(Path(file))
    if not methods:
        raise UserError("name at least one method: --pred NAME=DIR or --methods FILE")
    names = [m.name for m in methods]
    for name in names:
        if names.count(name) > 1:
            raise UserError(f"two predictions named {name!r}; name them with --pred NAME=DIR")
    return methods


def _gt_folders(args: argparse.Namespace) -> list[Path]:
    return [folder for _, folder in (_split(spec, "gt") for spec in args.gt)]


def input_folders(args: argparse.Namespace, methods: list[Method]) -> list[Path]:
    """Every folder eval reads: GT, image and every method's prediction folders."""
    folders = _gt_folders(args) + [_split(spec, "images")[1] for spec in args.images]
    for method in methods:
        own = [] if method.only_listed else [method.naming.folder]  # a toolkit file: none
        folders += [*own, *(n.folder for n in method.datasets.values())]
    return folders


def _families(args: argparse.Namespace) -> tuple[str, ...]:
    """The ``--compute`` selection, refused in one line when a name is unknown or a family's
    package is missing; and ``--metrics`` may not ask for a family's key it leaves out."""
    from ..metrics.families import FAMILIES, family_keys, resolve

    try:
        families = resolve(args.compute, images=bool(args.images))  # all: CCM with images
    except ValueError as exc:
        raise UserError(f"--compute: {exc}") from None
    asked = [m.strip() for m in args.metrics.split(",")]
    missing = [m for m in asked if m in family_keys() and m not in family_keys(families)]
    if missing and (args.latex or args.xlsx):
        owners = [name for name in FAMILIES if set(FAMILIES[name].keys) & set(missing)]
        raise UserError(f"--metrics {','.join(missing)}: computed only with --compute "
                        f"{','.join(owners)}")
    return families


def plan(args: argparse.Namespace) -> tuple[list[Job], list[Path]]:
    """Datasets and methods from the arguments, every pair checked before any is measured;
    also every input folder (for the checks of what may be written)."""
    from ..evaluation.groups import check_group_options, group_matcher, list_groups
    from ..evaluation.images import assign_images
    from ..evaluation.intervals import check_resampled, options
    from ..evaluation.job import Job
    from ..evaluation.selection import keep_listed, pair_method, select, stem_lists
    from ..evaluation.toolkit import add_datasets_file, list_named
    from ..evaluation.trimaps import assign_trimaps
    from ..paths import check_not_input, inside

    add_datasets_file(args)  # PySODEvalToolkit's dataset JSON: --gt, --images, --list
    families = _families(args)
    gts = [_split(spec, "gt") for spec in args.gt]
    named = [name is not None for name, _ in gts]
    if not all(named) and (any(named) or len(gts) > 1):
        raise UserError("with several --gt, name each one: --gt NAME=DIR")
    if len({name for name, _ in gts}) < len(gts):
        raise UserError("two --gt share a name; give each dataset its own NAME")
    methods = _methods(args)
    inputs = input_folders(args, methods)  # every folder named, selected or not
    names = [name or _default_name(folder, "gt") for name, folder in gts]
    kept = select(names, args.include_datasets, args.exclude_datasets, "datasets")
    gts = [gt for gt, name in zip(gts, names, strict=True) if name in kept]
    kept_methods = select([m.name for m in methods], args.include_methods,
                          args.exclude_methods, "methods")
    methods = [m for m in methods if m.name in kept_methods]
    lists = stem_lists(args.stem_list, kept, len(args.gt) > 1, _split, args.gt_namings)
    check_group_options(args, families)
    ci = options(args, [method.name for method in methods])
    out = Path(args.out)
    jobs = []
    for (name, folder), label in zip(gts, kept, strict=True):
        files, match = list_named(folder, *args.gt_namings.get(label, ("", ""))), None
        if args.groups:
            files, every = list_groups(folder, args.frames)
            match = group_matcher(every)
        if not files:
            raise DataError(f"no images in GT folder {folder}")
        files = keep_listed(files, lists.get(label), label, _listed)
        job = Job(label, inside(out, name) if name else out, files, families=families, ci=ci,
                  curves=args.curves, groups=args.groups)
        for method in methods:
            pair_method(job, method, name, args.allow_missing, _listed, match)
        if ci is not None:
            check_resampled(job, ci)
        if job.preds:
            jobs.append(job)
        else:
            logger.warning("dataset %s: no method has predictions for it; skipped", label)
    if not jobs:
        raise DataError("no method has predictions for any dataset: nothing to evaluate")
    assign_images(args, jobs, families, _split, _listed)
    assign_trimaps(args, jobs, families, _split)
    check_not_input(out, inputs)  # after the inputs are found: a missing one is named first
    return jobs, inputs


def _read_pair(job: Job, stem: str) -> tuple[Any, list[Any]]:
    """The GT and every method's prediction at the GT's size (uint8, bilinear resize)."""
    from ..evaluation.pool import read_pair

    return read_pair(job.gts[stem], [files.get(stem) for files in job.preds.values()])


def measure(job: Job, workers: int, shard: range | None = None, progress: bool = True,
            pool: MeasurePool | None = None) -> dict[str, SODMetrics]:
    """A ``SODMetrics`` per method, fed with the images of ``shard`` (indices into the sorted
    stems; default: all), each under its dataset index, so that shards merge exactly.

    With a ``pool`` its worker processes measure the images; otherwise this process does, with
    ``workers`` threads reading ahead."""
    from ..evaluation.log import finish, new_metrics
    from ..evaluation.read_ahead import prefetch
    from ..imageio import read_image_at
    from ..metrics import SODMetrics
    from ..progress import Progress
    from ..resources import available_cores
    from ..trimap import read_trimap

    stems = sorted(job.gts)
    shard = range(len(stems)) if shard is None else shard
    with Progress(len(shard), job.name, "img", enabled=progress) as bar:
        if pool is not None:
            pairs = [(i, str(job.gts[stems[i]]), [_text(files.get(stems[i]))
                                                  for files in job.preds.values()])
                     for i in shard]
            images = None if job.images is None else [str(job.images[stems[i]]) for i in shard]
            trimaps = (None if job.trimaps is None
                       else [str(job.trimaps[stems[i]]) for i in shard])
            tasks = pool.measure(pairs, len(job.preds), bar.update, job.families, images,
                                 trimaps)
            return {method: SODMetrics.from_states([states[k] for states in tasks])
                    for k, method in enumerate(job.preds)}
        threads = min(2, available_cores())  # weighted F-measure threads, as SODMetrics' default
        metrics = new_metrics(job, threads)
        pairs = prefetch(lambda stem: _read_pair(job, stem), [stems[i] for i in shard], workers)
        for index, (gt, preds) in zip(shard, pairs, strict=True):
            image = (None if job.images is None
                     else read_image_at(job.images[stems[index]], gt.shape))
            trimap = (None if job.trimaps is None
                      else read_trimap(job.trimaps[stems[index]], gt.shape))
            for metric, pred in zip(metrics.values(), preds, strict=True):
                if pred is not None:  # None: the method lacks it (--allow-missing)
                    metric.update(pred, gt, index=index, image=image, trimap=trimap)
            bar.update()
        finish(metrics)  # measured whole within the time of this call
        return metrics


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _per_image_rows(job: Job, metrics: dict[str, SODMetrics]) -> list[dict[str, str]]:
    from ..paths import resolved_files
    from ..report import per_image_rows

    stems = sorted(job.gts)
    gts = resolved_files(job.gts[stem] for stem in stems)
    rows = []
    for method, metric in metrics.items():
        own = job.preds[method]  # with --allow-missing, not every stem: rows go by index
        resolved = dict(zip(sorted(own), resolved_files(own[stem] for stem in sorted(own)),
                            strict=True))
        files = [(stem, "", gt, resolved.get(stem, "")) for stem, gt in zip(stems, gts,
                                                                           strict=True)]
        rows += per_image_rows(job.name, method, metric.per_image(), files)
    return rows


def _measure_shard(job: Job, group: EvalGroup, workers: int, pool: MeasurePool | None,
                   clock: Clock) -> dict[str, SODMetrics]:
    """This rank's shard measured; every rank's merged on rank 0 (a failure ends all ranks)."""
    from ..evaluation.log import measured
    from ..mask_encoding import log_notes
    shard = group.shard(len(job.gts))
    error, metrics = None, {}
    start = time.perf_counter()
    try:
        metrics = measure(job, workers, shard, progress=group.is_main, pool=pool)
    except UserError as exc:  # a file that does not decode: every rank must hear of it
        error = exc
    log_notes(job.name)  # masks read in another encoding than grey: once per folder
    group.settle(error)
    merged, counts = group.merge(metrics)
    clock.measuring += time.perf_counter() - start
    if group.is_main:
        measured(job, group, pool, counts, time.perf_counter() - start)
    return merged


def _write_job(job: Job, group: EvalGroup, workers: int, pool: MeasurePool | None,
               folder: DeferredFolder | None, clock: Clock) -> dict[str, dict[str, float]]:
    """Measure one dataset and write its files (rank 0); returns ``{method: scalar metrics}``
    (empty on other ranks)."""
    from ..evaluation.files import write_job
    from ..evaluation.groups import grouped_compute
    from ..evaluation.log import announce
    from ..metrics import STANDARD_KEYS, scalar_metrics
    from ..metrics.families import family_keys
    from ..report import markdown_table

    announce(job)
    metrics = _measure_shard(job, group, workers, pool, clock)
    if not group.is_main:
        return {}
    results = {method: grouped_compute(metric, sorted(job.gts)) if job.groups
               else metric.compute() for method, metric in metrics.items()}
    table = {method: scalar_metrics(result) for method, result in results.items()}
    write_job(job, results, table, _per_image_rows(job, metrics), folder)
    columns = STANDARD_KEYS + family_keys(job.families)  # all metrics are in the files
    print(f"\n{job.name}\n\n{markdown_table(table, 'method', columns)}")
    if job.ci is not None:
        from ..evaluation.intervals import write_ci

        grouped = (sorted(job.gts), results) if job.groups else None  # groups resampled
        start = time.perf_counter()
        job.ci_result, text = write_ci(job.out_dir, metrics, job.ci, folder.folder, columns,
                                       grouped, job.name)
        clock.intervals += time.perf_counter() - start
        print(text)
    return table


def _workers(args: argparse.Namespace) -> int:
    from ..resources import available_cores

    return max(1, args.workers if args.workers is not None else available_cores())


def run(args: argparse.Namespace) -> int:
    from ..engine.launcher import detect_dist_env
    from ..evaluation.pool import fork_is_safe, measure_pool, start_fork_server
    from ..resources import cap_workers

    fork = fork_is_safe() and detect_dist_env().world_size == 1  # torchrun imports torch
    if not fork:  # the fork server first: it boots while the files are listed
        start_fork_server(_gt_folders(args), _workers(args), explicit=args.workers is not None)
    from ..evaluation.files import check_collisions, claim_output, write_summary
    from ..evaluation.log import Clock
    from ..evaluation.ranks import EvalGroup
    from ..report.publish import check_table_outputs

    clock, (jobs, inputs) = Clock(), plan(args)  # every rank alike: the same refusals end all
    check_collisions(args, jobs, inputs)  # two outputs at one path, an output over an input
    check_table_outputs(args, inputs, "eval")
    group = EvalGroup()
    images = sum(len(group.shard(len(job.gts))) for job in jobs)  # this rank's
    workers = cap_workers(_workers(args), images, "--workers" if args.workers else None)
    pool = measure_pool(workers, images, explicit=args.workers is not None,
                        fork=fork)  # before any thread starts: the workers may be forked
    preload = _preload_plotting() if group.is_main else None
    failed = True
    try:
        folder = claim_output(Path(args.out), jobs, group, args.force)
        tables = [_write_job(job, group, workers, pool, folder, clock) for job in jobs]
        if group.is_main:
            write_summary(jobs, tables, args, folder)
            clock.summary(jobs, args.out)
        failed = False
    finally:
        # A failure is reported at once: under torchrun the launcher stops this rank as soon
        # as another one has ended, so no waiting here for matplotlib's import (a daemon
        # thread) or for the workers' current images.
        if pool is not None:
            pool.close(wait=not failed)
        if preload is not None and not failed:
            preload.join()
        group.close()
    return 0


def _preload_plotting() -> threading.Thread:
    """Import matplotlib (0.3-0.9 s, a third of a 1000-image run's fixed cost) in a thread
    while the images are read and measured, when a core is often idle; ``plot_curves`` then
    finds it loaded. Everything the main thread imports to measure is imported before."""
    import cv2  # noqa: F401  (the measuring path's modules, so no import is shared midway)
    import tqdm  # noqa: F401

    from .. import metrics, report  # noqa: F401

    def load() -> None:
        with contextlib.suppress(Exception):  # plot_curves imports it again, and reports
            import matplotlib.figure  # noqa: F401

    thread = threading.Thread(target=load, name="sodkit-preload", daemon=True)
    thread.start()
    return thread
