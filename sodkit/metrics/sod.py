"""``SODMetrics``: accumulate images, merge shards, compute every metric once.

Images may arrive one at a time (the evaluator's case) or as batches; same-size images are
buffered and measured together in chunks, so the histogram work is batched either way. The
object knows nothing of ranks: a distributed caller gathers ``state_dict()`` from every process,
loads each into a ``SODMetrics``, ``merge``s them and calls ``compute`` once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .prepare import as_index_list, as_uint8_batch, is_tensor
from .records import Records, measure_batch
from .results import summarize
from .workspace import opencv_single_threaded, scratch

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import torch

Batch = Union[np.ndarray, "torch.Tensor"]
STATE_VERSION = 1
# Pixels per measured chunk: ~32 images of 320x320. Larger chunks stop paying off on CPU
# (memory traffic), smaller ones pay per-call overhead.
CHUNK_PIXELS = 1 << 22


def _concatenate(parts: list[Batch], name: str, reuse_limit: int) -> Batch:
    """One batch from the buffered ones; chunk-sized results go to a reused buffer."""
    if len(parts) == 1:
        return parts[0]
    if is_tensor(parts[0]):
        import torch

        return torch.cat(parts)
    shape = (sum(len(p) for p in parts), *parts[0].shape[1:])
    if np.prod(shape) > reuse_limit:  # one huge update: do not keep its size around
        return np.concatenate(parts)
    return np.concatenate(parts, out=scratch(name, shape, np.uint8))


class SODMetrics:
    """Every standard SOD metric, equal to PySODMetrics 1.6 (MAE, S, E, wF, F, FmeasureV2).

    Example:
        >>> m = SODMetrics()
        >>> m.update(pred, gt)            # uint8 (H, W) or (B, H, W), numpy or torch
        >>> result = m.compute()          # {"MAE": ..., "maxFm": ..., "fm_curve": array, ...}

    Args:
        chunk_pixels: buffered pixels of one image size that trigger a batched measurement.
        threads: threads measuring the weighted F-measure (default: up to 2); results do not
            depend on it.
    """

    def __init__(self, chunk_pixels: int = CHUNK_PIXELS, threads: int | None = None) -> None:
        self.chunk_pixels = chunk_pixels
        self.threads = min(2, os.cpu_count() or 1) if threads is None else threads
        self._parts: list[Records] = []
        self._pending: dict[tuple[Any, ...], list[tuple[Batch, Batch, list[int]]]] = {}
        self._pending_count = 0
        self._next_index = 0

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts) + self._pending_count

    def update(
        self,
        pred: np.ndarray | torch.Tensor,
        gt: np.ndarray | torch.Tensor,
        index: int | Sequence[int] | None = None,
    ) -> None:
        """Add one pair (H, W) or a batch (B, H, W) of uint8 prediction and GT.

        The prediction must already be at the GT's resolution (resize, then quantise to uint8 as
        a PNG would be saved). ``index`` gives the images' dataset indices, which fix the order of
        aggregation so that merged shards give exactly the single-pass numbers; without it,
        indices continue from the largest one seen.
        """
        pred_b = as_uint8_batch(pred, "pred")
        gt_b = as_uint8_batch(gt, "gt")
        if pred_b.shape != gt_b.shape:
            raise ValueError(f"pred {tuple(pred_b.shape)} and gt {tuple(gt_b.shape)} differ in "
                             "shape: resize the prediction to the GT's size first")
        if is_tensor(pred_b) != is_tensor(gt_b):  # one on CUDA, one on CPU
            pred_b, gt_b = (b.cpu().numpy() if is_tensor(b) else b for b in (pred_b, gt_b))
        indices = as_index_list(index, len(pred_b), self._next_index)
        self._next_index = max(self._next_index, max(indices, default=-1) + 1)
        device = str(pred_b.device) if is_tensor(pred_b) else "cpu"
        key = (tuple(pred_b.shape[1:]), device)
        self._pending.setdefault(key, []).append((pred_b, gt_b, indices))
        self._pending_count += len(pred_b)
        buffered = sum(len(i) for _, _, i in self._pending[key])
        if buffered * pred_b.shape[1] * pred_b.shape[2] >= self.chunk_pixels:
            self._measure(key)

    def _measure(self, key: tuple[Any, ...]) -> None:
        entries = self._pending.pop(key)
        limit = 2 * self.chunk_pixels
        preds = _concatenate([p for p, _, _ in entries], "pending pred", limit)
        gts = _concatenate([g for _, g, _ in entries], "pending gt", limit)
        indices = np.array([i for _, _, idx in entries for i in idx], dtype=np.int64)
        self._pending_count -= len(indices)
        height, width = preds.shape[1:]
        step = max(1, self.chunk_pixels // (height * width))
        workers = self.threads - 1  # this thread works too
        pool = ThreadPoolExecutor(workers) if workers > 0 else None
        try:
            with opencv_single_threaded():
                for start in range(0, len(preds), step):
                    records = measure_batch(preds[start:start + step], gts[start:start + step],
                                            pool, workers)
                    records.index = indices[start:start + step]
                    self._parts.append(records)
        finally:
            if pool is not None:
                pool.shutdown()

    def _flush(self) -> Records:
        for key in list(self._pending):
            self._measure(key)
        if len(self._parts) > 1:
            self._parts = [Records.concatenate(self._parts)]
        return self._parts[0] if self._parts else Records.empty()

    def merge(self, other: SODMetrics) -> SODMetrics:
        """Add another accumulator's images (another shard, batch or process); returns self."""
        theirs = other._flush()
        mine = self._flush()
        self._parts = [Records.concatenate([mine, theirs])]
        self._next_index = max(self._next_index, other._next_index)
        return self

    def reset(self) -> None:
        """Forget every image."""
        self.__init__(self.chunk_pixels, self.threads)

    def compute(self) -> dict[str, Any]:
        """Every metric of the images so far (see ``sodkit.metrics.METRIC_KEYS``, python floats)
        and the curves (``*_curve``, 256 float64 values, threshold 255 first)."""
        records = self._flush()
        nan = np.isnan(records.scalars[:, 1])
        if nan.any():
            logger.warning("S-measure is NaN for %d image(s) (indices %s): their GT centroid lies "
                           "on the last row or column; PySODMetrics gives NaN too",
                           int(nan.sum()), records.index[nan][:10].tolist())
        return summarize(records)

    def state_dict(self) -> dict[str, Any]:
        """Picklable state (numpy arrays and ints), e.g. for ``all_gather_object``."""
        records = self._flush()
        return {"version": STATE_VERSION, "index": records.index, "hist": records.hist,
                "adaptive": records.adaptive, "scalars": records.scalars,
                "next_index": self._next_index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace this accumulator's images by those of ``state``."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported SODMetrics state version {state.get('version')!r}")
        records = Records(*(np.asarray(state[name]) for name in
                            ("index", "hist", "adaptive", "scalars")))
        self._parts = [records]
        self._pending = {}
        self._pending_count = 0
        self._next_index = int(state["next_index"])
