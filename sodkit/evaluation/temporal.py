"""``sodkit eval --groups --compute Flicker``: the rows of the frame-sequence families
(:mod:`sodkit.metrics.temporal`), filled in one pass over each video's frames in order.

A frame's Flicker row needs the previous frame's prediction and GT, which may lie in another
worker's run of images or another torchrun rank's shard. Rather than pass frames across shards,
the rows are computed deliberately here, on rank 0 (this process alone), after the shards are
merged: every group's frames in frame order (the number their names end with, as ``--frames``
orders them), read again with threads ahead (the GT and each method's prediction at the GT's
size, exactly as they were measured), two frames of each method in memory. The numbers are
thus those of one process, whatever the sharding. Its cost: one more read of each grouped
dataset's masks, on rank 0, only when Flicker is selected.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..metrics import SODMetrics
    from .job import Job


def frame_rows(job: Job, workers: int) -> list[np.ndarray]:
    """Each method's (N, 2) Flicker rows in dataset-index order (the sorted keys of
    ``job.gts``)."""
    from ..metrics.temporal import WIDTH, flicker_row
    from .groups import SEPARATOR, _frame_order
    from .pool import read_pair
    from .read_ahead import prefetch

    stems = sorted(job.gts)
    index = {stem: i for i, stem in enumerate(stems)}
    ordered = sorted(stems, key=lambda key: (key.split(SEPARATOR, 1)[0],
                                             _frame_order(key.split(SEPARATOR, 1)[1])))
    methods = list(job.preds)
    rows = [np.zeros((len(stems), WIDTH)) for _ in methods]

    def read(key: str) -> tuple:
        return read_pair(job.gts[key], [job.preds[m].get(key) for m in methods])

    group, prev_gt, prev_preds = None, None, [None] * len(methods)
    reads = prefetch(read, ordered, workers)
    with contextlib.closing(reads) as pairs:
        for key, (gt, preds) in zip(ordered, pairs, strict=True):
            if key.split(SEPARATOR, 1)[0] != group:  # a new video: no previous frame
                group, prev_gt, prev_preds = key.split(SEPARATOR, 1)[0], None, [None] * len(
                    methods)
            for k, pred in enumerate(preds):
                rows[k][index[key]] = flicker_row(prev_preds[k], pred, prev_gt, gt)
            prev_gt, prev_preds = gt, preds
    return rows


def fill_sequences(job: Job, metrics: dict[str, SODMetrics], workers: int
                   ) -> dict[str, SODMetrics]:
    """``metrics`` (rank 0's, merged) with the rows of the selected sequence families filled
    in, each image's row at its dataset index."""
    from ..metrics import SODMetrics
    from ..metrics.families import sequences

    names = sequences(job.families)
    if not names or not job.groups:
        return metrics
    rows = frame_rows(job, workers)  # Flicker, the one sequence family
    out = {}
    for (method, metric), filled in zip(metrics.items(), rows, strict=True):
        state = metric.state_dict()
        extra = dict(state["extra"])
        extra[names[0]] = filled[state["index"]]
        out[method] = SODMetrics.from_states([{**state, "extra": extra}])
    return out
