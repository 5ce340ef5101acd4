"""Per-image records: the small, fixed-size sufficient statistics every metric is computed from.

One image contributes its dataset index, two 256-bin histograms of the truncated prediction (on
the GT and off it: exact integers, from which all curves follow), the true / false positives at
its adaptive threshold, and three float64 scalars (MAE, S-measure, weighted F). Records from any
batches, shards or processes concatenate; the final numbers are computed once, in index order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .histogram import centroids, joint_histograms
from .prepare import adaptive_thresholds, is_tensor, minmax_tables, truncated_levels
from .smeasure import smeasure
from .wfmeasure import weighted_fmeasure_uint8
from .workspace import opencv_single_threaded, scratch

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
        extra: optional families' rows, ``{family name: (N, width) float64}`` (``families``).
    """

    index: np.ndarray
    hist: np.ndarray
    adaptive: np.ndarray
    scalars: np.ndarray
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def empty(cls) -> Records:
        return cls(np.zeros(0, np.int64), np.zeros((0, 2, 256), np.int32),
                   np.zeros((0, 2), np.int64), np.zeros((0, len(SCALARS))))

    @classmethod
    def concatenate(cls, parts: list[Records]) -> Records:
        """One set of records from several (every non-empty part must carry the same optional
        families: a merge of states measured with different selections is refused)."""
        if not parts:
            return cls.empty()
        filled = [p for p in parts if len(p)]
        names = sorted(filled[0].extra) if filled else []
        if any(sorted(p.extra) != names for p in filled):
            seen = sorted({"+".join(sorted(p.extra)) or "none" for p in filled})
            raise ValueError(f"metric states measured with different metric families "
                             f"({', '.join(seen)}) cannot merge: measure every shard alike")
        extra = {name: np.concatenate([p.extra[name] for p in filled]) for name in names}
        return cls(*(np.concatenate([getattr(p, name) for p in parts])
                     for name in ("index", "hist", "adaptive", "scalars")), extra=extra)

    def __len__(self) -> int:
        return len(self.index)

    def sorted(self) -> Records:
        """Rows in dataset-index order: the one order every merge of the same images gives."""
        order = np.argsort(self.index, kind="stable")
        return Records(self.index[order], self.hist[order], self.adaptive[order],
                       self.scalars[order], {k: v[order] for k, v in self.extra.items()})


def _truncated_histograms(hist: np.ndarray, table: np.ndarray) -> np.ndarray:
    """(B, 256, 2) raw-level histograms -> (B, 2, 256) histograms of the truncated map."""
    batch = len(hist)
    bins = (truncated_levels(table) + 256 * np.arange(batch)[:, None]).ravel()
    out = np.empty((batch, 2, 256), np.int32)
    for bit in (0, 1):
        counts = np.bincount(bins, weights=hist[:, :, bit].ravel(), minlength=batch * 256)
        out[:, bit] = counts.reshape(batch, 256)
    return out


def _binarised(gt: np.ndarray | list[np.ndarray]) -> np.ndarray:
    """``gt > 128`` as a (B, H, W) bool array in a reused buffer, from a (B, H, W) array or a list
    of (H, W) arrays (read in place: stacking 40 buffered pairs cost a copy of 8 MB per chunk)."""
    if isinstance(gt, np.ndarray):
        return np.greater(gt, 128, out=scratch("fg", gt.shape, bool))
    fg = scratch("fg", (len(gt), *gt[0].shape), bool)
    for image, out in zip(gt, fg, strict=True):
        np.greater(image, 128, out=out)
    return fg


def measure_batch(
    pred: np.ndarray | torch.Tensor,
    gt: np.ndarray | torch.Tensor,
    weighted_f: bool = True,
    scalars: np.ndarray | None = None,
) -> Records:
    """Records of a batch of same-size images (index left at 0; the caller assigns it).

    The histograms run on the data's device (numpy on CPU, see ``histogram``), followed by small
    float64 numpy work on (B, 4, 256, 2) counts. The weighted F-measure runs per image on the
    CPU (OpenCV), here in this thread; ``SODMetrics`` instead passes ``weighted_f=False`` and
    has a :class:`~sodkit.metrics.parallel.WeightedFQueue` fill that column of ``scalars``.

    Args:
        pred: (B, H, W) uint8 predictions at the GT's resolution (numpy, or CUDA tensor), or a
            list of B (H, W) numpy arrays (``SODMetrics``' buffered images, read in place).
        gt: (B, H, W) uint8 GTs (binarised with ``> 128``), same kind as ``pred``.
        weighted_f: False leaves its column as it is (NaN unless ``scalars`` says otherwise).
        scalars: optional (B, 3) float64 array that becomes the records' ``scalars``.
    """
    if is_tensor(pred):
        fg = gt > 128
        pred_np, fg_np = pred.cpu().numpy(), fg.cpu().numpy()
    else:
        fg = _binarised(gt)
        pred_np, fg_np = pred, fg
    if scalars is None:
        scalars = np.full((len(pred), len(SCALARS)), np.nan)
    with opencv_single_threaded():
        split_row, split_col = centroids(fg)
        counts = joint_histograms(pred, fg, split_row, split_col)
    hist = counts.sum(axis=1)  # (B, 256 levels, 2 GT bits)
    level_counts = hist.sum(axis=2)
    table = minmax_tables(level_counts)
    size = level_counts.sum(axis=1)
    scalars[:, 0] = ((hist[:, :, 0] * table).sum(axis=1)
                     + (hist[:, :, 1] * (1 - table)).sum(axis=1)) / size
    thresholds = adaptive_thresholds(table, level_counts, pred_np)
    above = table >= thresholds[:, None]
    adaptive = np.stack([(hist[:, :, 1] * above).sum(axis=1),
                         (hist[:, :, 0] * above).sum(axis=1)], axis=1)
    scalars[:, 1] = smeasure(counts, table, (split_row, split_col), pred_np, fg_np)
    if weighted_f:
        with opencv_single_threaded():
            for i, (image, mask) in enumerate(zip(pred_np, fg_np, strict=True)):
                scalars[i, 2] = weighted_fmeasure_uint8(image, mask)
    return Records(np.zeros(len(pred), np.int64), _truncated_histograms(hist, table),
                   adaptive.astype(np.int64), scalars)
