"""The measuring of one dataset: every method's predictions against the GTs, in worker
processes (:mod:`.pool`) or in this process with reads ahead (:mod:`.read_ahead`), one shard
per rank under torchrun (:mod:`.ranks`).

A prediction of another size than its GT is resized to the GT's size with bilinear
interpolation on the uint8 map, as PySODEvalToolkit does, so the numbers equal that toolkit's.
Every image is measured under its dataset index, so that shards and worker runs merge exactly.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from ..metrics import SODMetrics
    from .job import Job
    from .log import Clock
    from .pool import MeasurePool
    from .ranks import Ranks


def _read_pair(job: Job, stem: str) -> tuple[Any, list[Any]]:
    """The GT and every method's prediction at the GT's size (uint8, bilinear resize)."""
    from .pool import read_pair

    return read_pair(job.gts[stem], [files.get(stem) for files in job.preds.values()])


def measure(job: Job, workers: int, shard: range | None = None, progress: bool = True,
            pool: MeasurePool | None = None) -> dict[str, SODMetrics]:
    """A ``SODMetrics`` per method, fed with the images of ``shard`` (indices into the sorted
    stems; default: all), each under its dataset index, so that shards merge exactly.

    With a ``pool`` its worker processes measure the images; otherwise this process does, with
    ``workers`` threads reading ahead."""
    from ..imageio import read_image_at
    from ..metrics import SODMetrics
    from ..progress import Progress
    from ..resources import available_cores
    from ..trimap import read_trimap
    from .log import finish, new_metrics
    from .read_ahead import prefetch

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
        reads = prefetch(lambda stem: _read_pair(job, stem), [stems[i] for i in shard], workers)
        with contextlib.closing(reads) as pairs:  # closed here on an error, not by the GC
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


def per_image_rows_of(job: Job, metrics: dict[str, SODMetrics]) -> list[dict[str, str]]:
    """The rows of the dataset's ``results_per_image.csv``: each method's scores of each image
    it has, with the image's files."""
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


def measure_shard(job: Job, ranks: Ranks, workers: int, pool: MeasurePool | None,
                  clock: Clock) -> dict[str, SODMetrics]:
    """This rank's shard measured; every rank's merged on rank 0 (a failure ends all ranks)."""
    from ..mask_encoding import log_notes
    from .log import measured

    shard = ranks.shard(len(job.gts))
    error, metrics = None, {}
    start = time.perf_counter()
    try:
        metrics = measure(job, workers, shard, progress=ranks.is_main, pool=pool)
    except UserError as exc:  # a file that does not decode: every rank must hear of it
        error = exc
    log_notes(job.name)  # masks read in another encoding than grey: once per folder
    ranks.settle(error)
    merged, counts = ranks.merge(metrics)
    clock.measuring += time.perf_counter() - start
    if ranks.is_main:
        measured(job, ranks, pool, counts, time.perf_counter() - start)
    return merged


