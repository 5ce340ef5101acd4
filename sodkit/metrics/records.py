"""Per-image records: the small, fixed-size sufficient statistics every metric is computed from.

One image contributes its dataset index, two 256-bin histograms of the truncated prediction (on
the GT and off it: exact integers, from which all curves follow), the true / false positives at
its adaptive threshold, and three float64 scalars (MAE, S-measure, weighted F). Records from any
batches, shards or processes concatenate; the final numbers are computed once, in index order.
"""

from __future__ import annotations

import itertools
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .histogram import centroids, joint_histograms
from .prepare import adaptive_thresholds, is_tensor, minmax_tables, truncated_levels
from .smeasure import smeasure
from .wfmeasure import weighted_fmeasure_uint8
from .workspace import scratch

if TYPE_CHECKING:
    import torch

SCALARS = ("MAE", "Smeasure", "wFmeasure")


@dataclass
class Records:
    """Columns of per-image records; row ``i`` describes the image of dataset index ``index[i]``.

    Attributes:
        index: (N,) int64 dataset indices.
        hist: (N, 2, 256) int32, pixels per truncated level off the GT [0] and on it [1].
        adaptive: (N, 2) int64, true and false positives at the adaptive threshold.
        scalars: (N, 3) float64, per-image MAE, S-measure and weighted F (``SCALARS``).
    """

    index: np.ndarray
    hist: np.ndarray
    adaptive: np.ndarray
    scalars: np.ndarray

    @classmethod
    def empty(cls) -> Records:
        return cls(np.zeros(0, np.int64), np.zeros((0, 2, 256), np.int32),
                   np.zeros((0, 2), np.int64), np.zeros((0, len(SCALARS))))

    @classmethod
    def concatenate(cls, parts: list[Records]) -> Records:
        if not parts:
            return cls.empty()
        return cls(*(np.concatenate([getattr(p, name) for p in parts])
                     for name in ("index", "hist", "adaptive", "scalars")))

    def __len__(self) -> int:
        return len(self.index)

    def sorted(self) -> Records:
        """Rows in dataset-index order: the one order every merge of the same images gives."""
        order = np.argsort(self.index, kind="stable")
        return Records(self.index[order], self.hist[order], self.adaptive[order],
                       self.scalars[order])


def _truncated_histograms(hist: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(B, 256, 2) raw-level histograms -> (B, 2, 256) histograms of the truncated map."""
    batch = len(hist)
    bins = (truncated_levels(table) + 256 * np.arange(batch)[:, None]).ravel()
    out = np.empty((batch, 2, 256), np.int32)
    for bit in (0, 1):
        counts = np.bincount(bins, weights=hist[:, :, bit].ravel(), minlength=batch * 256)
        out[:, bit] = counts.reshape(batch, 256)
    return out


class _WeightedFJobs:
    """Per-image weighted F-measures, drained by pool workers and by the calling thread.

    Workers start at once; the caller computes the histogram metrics meanwhile and then helps
    drain the rest, so ``threads`` threads stay busy without oversubscribing the cores.
    """

    def __init__(self, pred: np.ndarray, fg: np.ndarray, pool: Executor | None, workers: int,
                 enabled: bool = True):
        self.pred, self.fg = pred, fg
        self.scores = np.full(len(pred), np.nan)
        self._todo = len(pred) if enabled else 0
        self._next = itertools.count()  # thread-safe under the GIL
        self._futures = [pool.submit(self.drain) for _ in range(workers)] if pool else []

    def drain(self) -> None:
        while (i := next(self._next)) < self._todo:
            self.scores[i] = weighted_fmeasure_uint8(self.pred[i], self.fg[i])

    def result(self) -> np.ndarray:
        self.drain()
        for future in self._futures:
            future.result()
        return self.scores


def measure_batch(
    pred: np.ndarray | torch.Tensor,
    gt: np.ndarray | torch.Tensor,
    pool: Executor | None = None,
    workers: int = 0,
    weighted_f: bool = True,
) -> Records:
    """Records of a batch of same-size images (index left at 0; the caller assigns it).

    The histograms run on the data's device (numpy on CPU, see ``histogram``), followed by small
    float64 numpy work on (B, 4, 256, 2) counts. The weighted F-measure runs per image on the
    CPU (OpenCV), in ``workers`` threads of ``pool`` and then in this thread too; OpenCV and
    numpy release the GIL, and the results do not depend on the threads.

    Args:
        pred: (B, H, W) uint8 predictions at the GT's resolution (numpy, or CUDA tensor).
        gt: (B, H, W) uint8 GTs (binarised with ``> 128``), same kind as ``pred``.
        pool: optional executor for the per-image weighted F-measure.
        workers: how many of ``pool``'s threads to use.
        weighted_f: False leaves it NaN (benchmarks time the other metrics alone with it).
    """
    if is_tensor(pred):
        fg = gt > 128
        pred_np, fg_np = pred.cpu().numpy(), fg.cpu().numpy()
    else:
        fg = np.greater(gt, 128, out=scratch("fg", gt.shape, bool))
        pred_np, fg_np = pred, fg
    jobs = _WeightedFJobs(pred_np, fg_np, pool, workers, enabled=weighted_f)
    split_row, split_col = centroids(fg)
    counts = joint_histograms(pred, fg, split_row, split_col)
    hist = counts.sum(axis=1)  # (B, 256 levels, 2 GT bits)
    level_counts = hist.sum(axis=2)
    table = minmax_tables(level_counts)
    size = level_counts.sum(axis=1)
    mae = ((hist[:, :, 0] * table).sum(axis=1) + (hist[:, :, 1] * (1 - table)).sum(axis=1)) / size
    thresholds = adaptive_thresholds(table, level_counts, pred_np)
    above = table >= thresholds[:, None]
    adaptive = np.stack([(hist[:, :, 1] * above).sum(axis=1),
                         (hist[:, :, 0] * above).sum(axis=1)], axis=1)
    sm = smeasure(counts, table, (split_row, split_col), pred_np, fg_np)
    return Records(np.zeros(len(pred), np.int64), _truncated_histograms(hist, table),
                   adaptive.astype(np.int64), np.stack([mae, sm, jobs.result()], axis=1))
