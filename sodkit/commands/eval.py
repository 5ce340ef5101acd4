"""``sodkit eval``: measure saved predictions of any number of methods against GT folders.

Predictions pair with GTs by file stem. A prediction of another size than its GT is resized to
the GT's size with bilinear interpolation on the uint8 map, as PySODEvalToolkit does, so the
numbers equal that toolkit's. Heavy imports (torch, OpenCV, matplotlib) stay inside ``run``.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError, UserError

HELP = "evaluate saved predictions of one or more methods against GT masks (tables + curves)"

logger = logging.getLogger(__name__)

SHOWN_STEMS = 10  # stems listed in an error or warning message


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gt", action="append", required=True, metavar="[NAME=]DIR",
        help="GT mask folder; repeat as NAME=DIR for several datasets, whose predictions are "
             "then read from <pred DIR>/NAME/")
    parser.add_argument(
        "--pred", action="append", required=True, metavar="[NAME=]DIR",
        help="a method's prediction folder (NAME defaults to the folder's name); repeatable")
    parser.add_argument("--out", required=True, help="folder for results.{json,md,csv}, pr.png, "
                                                     "fm.png (a sub-folder per named dataset)")
    parser.add_argument("--force", action="store_true",
                        help="write into an --out folder that holds files sodkit did not write "
                             "(only files of the names it writes are replaced)")
    parser.add_argument("--workers", type=int, default=2,
                        help="threads decoding images (default 2)")


@dataclass
class Job:
    """One GT dataset and, per method, the prediction file of each GT stem."""

    name: str
    out_dir: Path
    gts: dict[str, Path]
    preds: dict[str, dict[str, Path]] = field(default_factory=dict)


def _split(spec: str, what: str) -> tuple[str | None, Path]:
    from ..paths import check_name

    name, sep, path = spec.partition("=")
    if not sep:
        return None, Path(spec)
    if not name or not path:
        raise UserError(f"--{what} {spec!r}: expected NAME=DIR or DIR")
    return check_name(name, f"--{what} {spec!r}: NAME", "ours"), Path(path)


def _default_name(folder: Path, what: str) -> str:
    from ..paths import check_name

    return check_name(folder.resolve().name, f"--{what} {folder} (the folder's name)", "ours")


def _listed(stems: Iterable[str]) -> str:
    stems = sorted(stems)
    more = f" and {len(stems) - SHOWN_STEMS} more" if len(stems) > SHOWN_STEMS else ""
    return ", ".join(stems[:SHOWN_STEMS]) + more


def _pair(job: Job, method: str, folder: Path) -> None:
    from ..imageio import list_images

    found = list_images(folder)
    missing = job.gts.keys() - found.keys()
    if missing:
        raise DataError(f"method {method!r}: {len(missing)} of {len(job.gts)} predictions missing "
                        f"in {folder}: {_listed(missing)}")
    extra = found.keys() - job.gts.keys()
    if extra:
        logger.warning("method %r: %d predictions in %s have no GT and are ignored: %s",
                       method, len(extra), folder, _listed(extra))
    job.preds[method] = {stem: found[stem] for stem in job.gts}


def plan(args: argparse.Namespace) -> list[Job]:
    """Datasets and methods from the arguments, every pair checked before any is measured."""
    from ..imageio import list_images
    from ..paths import check_not_input, inside

    gts = [_split(spec, "gt") for spec in args.gt]
    named = [name is not None for name, _ in gts]
    if not all(named) and (any(named) or len(gts) > 1):
        raise UserError("with several --gt, name each one: --gt NAME=DIR")
    if len({name for name, _ in gts}) < len(gts):
        raise UserError("two --gt share a name; give each dataset its own NAME")
    methods: dict[str, Path] = {}
    for spec in args.pred:
        name, folder = _split(spec, "pred")
        name = name or _default_name(folder, "pred")
        if name in methods:
            raise UserError(f"two predictions named {name!r}; name them with --pred NAME=DIR")
        methods[name] = folder
    out = Path(args.out)
    check_not_input(out, [folder for _, folder in gts] + list(methods.values()))
    jobs = []
    for name, folder in gts:
        files = list_images(folder)
        if not files:
            raise DataError(f"no images in GT folder {folder}")
        job = Job(name or _default_name(folder, "gt"), inside(out, name) if name else out, files)
        for method, pred_root in methods.items():
            _pair(job, method, pred_root / name if name else pred_root)
        jobs.append(job)
    return jobs


def _read_pair(job: Job, stem: str) -> tuple[Any, list[Any]]:
    """The GT and every method's prediction at the GT's size (uint8, bilinear resize)."""
    import cv2

    from ..imageio import read_mask

    gt = read_mask(job.gts[stem])
    preds = []
    for files in job.preds.values():
        pred = read_mask(files[stem])
        if pred.shape != gt.shape:
            pred = cv2.resize(pred, gt.shape[::-1], interpolation=cv2.INTER_LINEAR)
        preds.append(pred)
    return gt, preds


def _prefetch(read: Callable[[str], Any], items: list[str], workers: int) -> Iterator[Any]:
    """``read`` over ``items`` in threads, in order, with a bounded number of reads ahead."""
    window = max(4 * workers, 8)
    with ThreadPoolExecutor(max(workers, 1)) as pool:
        pending = [pool.submit(read, item) for item in items[:window]]
        for i in range(len(items)):
            result = pending[i].result()
            pending[i] = None
            if i + window < len(items):
                pending.append(pool.submit(read, items[i + window]))
            yield result


def measure(job: Job, workers: int) -> dict[str, dict[str, Any]]:
    """``SODMetrics.compute()`` per method over the job's images, with a progress bar."""
    from tqdm import tqdm

    from ..metrics import SODMetrics

    metrics = {method: SODMetrics() for method in job.preds}
    stems = sorted(job.gts)
    pairs = _prefetch(lambda stem: _read_pair(job, stem), stems, workers)
    for index, (gt, preds) in enumerate(tqdm(pairs, total=len(stems), desc=job.name,
                                             unit="img", disable=None)):
        for metric, pred in zip(metrics.values(), preds, strict=True):
            metric.update(pred, gt, index=index)
    return {method: metric.compute() for method, metric in metrics.items()}


def run(args: argparse.Namespace) -> int:
    from ..metrics import STANDARD_KEYS, scalar_metrics
    from ..paths import claim_folder
    from ..report import markdown_table, plot_curves, write_results

    jobs = plan(args)
    claim_folder(Path(args.out), "eval", force=args.force)
    combined: dict[str, dict[str, float]] = {}
    for job in jobs:
        logger.info("%s: %d images, methods: %s", job.name, len(job.gts), ", ".join(job.preds))
        results = measure(job, args.workers)
        table = {method: scalar_metrics(result) for method, result in results.items()}
        write_results(table, job.out_dir, row_label="method")
        plot_curves(results, job.out_dir)
        shown = markdown_table(table, "method", STANDARD_KEYS)  # all metrics are in the files
        print(f"\n{job.name}\n\n{shown}")
        combined.update({f"{job.name}/{method}": values for method, values in table.items()})
    if len(jobs) > 1:
        write_results(combined, args.out, row_label="dataset/method")
    logger.info("results written to %s", args.out)
    return 0
