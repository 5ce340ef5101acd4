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
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from ..text import plural
from .families import measure_families, reads_images, resolve
from .parallel import WeightedFQueue, pairs_of
from .prepare import as_index_list, as_uint8_batch, is_tensor
from .records import SCALARS, Records, measure_batch
from .results import per_image, summarize_with_per_image

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    import torch

Batch = Union[np.ndarray, "torch.Tensor"]
STATE_VERSION = 1
# Pixels per measured chunk: 41 images of 320x320. Smaller chunks pay per-call overhead
# (2^20: +7% in total); 2^21..2^24 measured within 3% of each other.
CHUNK_PIXELS = 1 << 22


def _batch(parts: list[Batch]) -> Batch | list[np.ndarray]:
    """The buffered batches as one: CUDA tensors concatenated on their device, numpy batches as
    a list of their images (read in place by ``measure_batch``; copying them into one array
    cost 8 MB of copies per chunk)."""
    if is_tensor(parts[0]):
        if len(parts) == 1:
            return parts[0]
        import torch

        return torch.cat(parts)
    return [image for part in parts for image in part]


def _pairs(preds: Batch | list[np.ndarray], gts: Batch | list[np.ndarray]) -> list:
    """(pred, gt) numpy pairs of a chunk: a list of images, a (B, H, W) array or tensor."""
    if isinstance(preds, list):
        return list(zip(preds, gts, strict=True))
    return pairs_of(preds, gts)


def _images(image: np.ndarray | Sequence[np.ndarray] | None,
            shape: tuple[int, ...]) -> list[np.ndarray]:
    """The batch's RGB images as a list, each checked against its GT's size."""
    if image is None:
        raise ValueError("metric family CCM reads the images: update(pred, gt, image=rgb)")
    images = [image] if isinstance(image, np.ndarray) and image.ndim == 3 else list(image)
    if len(images) != shape[0]:
        raise ValueError(f"{len(images)} images for {shape[0]} pairs")
    for rgb in images:
        if rgb.shape != (*shape[1:], 3) or rgb.dtype != np.uint8:
            raise ValueError(f"image {rgb.shape} {rgb.dtype}: CCM needs uint8 RGB images of "
                             f"the GT's size {tuple(shape[1:])} x 3")
    return images


def _trimaps(trimap: np.ndarray | Sequence[np.ndarray | None] | None,
             shape: tuple[int, ...]) -> list[np.ndarray | None]:
    """The batch's trimaps as a list (None: that image's whole area), checked against the GT."""
    if trimap is None or (isinstance(trimap, np.ndarray) and trimap.ndim == 2):
        trimaps = [trimap] * shape[0] if trimap is None else [trimap]
    else:
        trimaps = list(trimap)
    if len(trimaps) != shape[0]:
        raise ValueError(f"{len(trimaps)} trimaps for {shape[0]} pairs")
    for one in trimaps:
        if one is not None and (one.shape != tuple(shape[1:]) or one.dtype != np.uint8):
            raise ValueError(f"trimap {one.shape} {one.dtype}: the matting metrics need uint8 "
                             f"trimaps of the GT's size {tuple(shape[1:])}")
    return trimaps


class SODMetrics:
    """Every standard SOD metric, equal to PySODMetrics 1.6 (MAE, S, E, wF, F, FmeasureV2).

    Example:
        >>> m = SODMetrics()
        >>> m.update(pred, gt)            # uint8 (H, W) or (B, H, W), numpy or torch
        >>> result = m.compute()          # {"MAE": ..., "maxFm": ..., "fm_curve": array, ...}

    Args:
        chunk_pixels: buffered pixels of one image size that trigger a batched measurement;
            buffered pixels of all sizes together never exceed it much either (a dataset of
            many sizes held every image until the end: images x pixels x methods).
        threads: threads measuring the weighted F-measure (default: up to 2); results do not
            depend on it.
        families: optional metric families to compute as well (``sodkit.metrics.families``:
            names, ``"all"``, or a comma-separated text); default none.
    """

    def __init__(self, chunk_pixels: int = CHUNK_PIXELS, threads: int | None = None,
                 families: Sequence[str] | str | None = None) -> None:
        self.chunk_pixels = chunk_pixels
        self.threads = min(2, os.cpu_count() or 1) if threads is None else threads
        self.families = resolve(families)
        self._parts: list[Records] = []
        self._pending: dict[tuple[Any, ...], list[tuple[Batch, Batch, list[int]]]] = {}
        self._pending_count = 0
        self._pending_pixels = 0  # of every size: what the buffers hold, bounded by chunk_pixels
        self._images: dict[tuple[Any, ...], list[np.ndarray]] = {}  # for CCM, as _pending
        self._trimaps: dict[tuple[Any, ...], list[np.ndarray | None]] = {}  # for matting
        self._next_index = 0
        self._queue: WeightedFQueue | None = None  # while images are being measured
        self._per_image: tuple[Records, dict[str, np.ndarray]] | None = None  # of compute()

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts) + self._pending_count

    def update(
        self,
        pred: np.ndarray | torch.Tensor,
        gt: np.ndarray | torch.Tensor,
        index: int | Sequence[int] | None = None,
        image: np.ndarray | Sequence[np.ndarray] | None = None,
        trimap: np.ndarray | Sequence[np.ndarray | None] | None = None,
    ) -> None:
        """Add one pair (H, W) or a batch (B, H, W) of uint8 prediction and GT.

        The prediction must already be at the GT's resolution (resize, then quantise to uint8 as
        a PNG would be saved). ``index`` gives the images' dataset indices, which fix the order of
        aggregation so that merged shards give exactly the single-pass numbers; without it,
        indices continue from the largest one seen. ``image``: the RGB uint8 image(s) (H, W, 3)
        at the GT's size, needed (only) by the families that read them (CCM). ``trimap``: uint8
        trimap(s) (0 / 128 / 255) at the GT's size, read by the matting family (its metrics
        are then over the unknown region; None: the whole image).
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
        if reads_images(self.families):
            self._images.setdefault(key, []).extend(_images(image, tuple(pred_b.shape)))
        if "matting" in self.families:
            self._trimaps.setdefault(key, []).extend(_trimaps(trimap, tuple(pred_b.shape)))
        self._pending.setdefault(key, []).append((pred_b, gt_b, indices))
        self._pending_count += len(pred_b)
        self._pending_pixels += len(pred_b) * pred_b.shape[1] * pred_b.shape[2]
        buffered = sum(len(entry[2]) for entry in self._pending[key])
        if buffered * pred_b.shape[1] * pred_b.shape[2] >= self.chunk_pixels:
            self._measure(key)
        elif self._pending_pixels >= self.chunk_pixels:  # images of many sizes: every buffer
            for other in list(self._pending):
                self._measure(other)

    def _measure(self, key: tuple[Any, ...]) -> None:
        """Measure the buffered images of one size: their weighted F-measures are queued for
        the worker threads first, then this thread computes the histogram metrics chunk by chunk
        and helps with the weighted F-measures until none is left to start (``parallel``); the
        workers fill in the records' weighted F column meanwhile."""
        entries = self._pending.pop(key)
        scalars = np.full((sum(len(e[2]) for e in entries), len(SCALARS)), np.nan)
        if self._queue is None:
            self._queue = WeightedFQueue(self.threads - 1)  # this thread works too
        # The workers read the buffered batches: our own copies, untouched until they are done.
        self._queue.submit([pair for pred, gt, _ in entries for pair in pairs_of(pred, gt)],
                           scalars[:, 2])
        preds = _batch([entry[0] for entry in entries])
        gts = _batch([entry[1] for entry in entries])
        indices = np.array([i for entry in entries for i in entry[2]], dtype=np.int64)
        images = self._images.pop(key, None)
        trimaps = self._trimaps.pop(key, None)
        self._pending_count -= len(indices)
        self._pending_pixels -= len(indices) * key[0][0] * key[0][1]
        height, width = key[0]
        step = max(1, self.chunk_pixels // (height * width))
        for start in range(0, len(preds), step):
            chunk = slice(start, start + step)
            records = measure_batch(preds[chunk], gts[chunk], weighted_f=False,
                                    scalars=scalars[chunk])
            records.index = indices[chunk]
            if self.families:
                records.extra = measure_families(
                    self.families, _pairs(preds[chunk], gts[chunk]), len(records),
                    None if images is None else images[chunk],
                    None if trimaps is None else trimaps[chunk])
            self._parts.append(records)
        self._queue.drain()

    def _flush(self) -> Records:
        for key in list(self._pending):
            self._measure(key)
        self._stop_workers()  # every weighted F-measure in, and no idle threads left
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
        self._stop_workers()
        self.__init__(self.chunk_pixels, self.threads, self.families)

    def _stop_workers(self) -> None:
        """Let queued weighted F-measures finish (their arrays are ours) and the threads go."""
        queue, self._queue = self._queue, None
        if queue is not None:
            queue.close()

    def compute(self) -> dict[str, Any]:
        """Every metric of the images so far (see ``sodkit.metrics.METRIC_KEYS``, python floats)
        and the curves (``*_curve``, 256 float64 values, threshold 255 first)."""
        records = self._flush()
        nan = np.isnan(records.scalars[:, 1])
        if nan.any():
            logger.warning("S-measure is NaN for %s (indices %s): their GT centroid lies on the "
                           "last row or column; PySODMetrics gives NaN too",
                           plural(int(nan.sum()), "image"), records.index[nan][:10].tolist())
        result, scores = summarize_with_per_image(records)
        self._per_image = (records, scores)  # small: a few floats per image
        return result

    def per_image(self) -> dict[str, np.ndarray]:
        """Each image's own MAE, S, wF, max / adaptive F and E, the computed families' values
        (MSIoU, BIoU: max / mean of the image's own curve), with its dataset ``index``
        (arrays in index order; see :func:`sodkit.metrics.results.per_image`). After
        :meth:`compute` with no image added since, they come from the same pass."""
        records = self._flush()
        if self._per_image is not None and self._per_image[0] is records:
            return {key: value.copy() for key, value in self._per_image[1].items()}
        return per_image(records)

    def records(self) -> Records:
        """The per-image records of every image so far, in dataset-index order: what
        :meth:`compute` reads (e.g. for ``sodkit.metrics.bootstrap``)."""
        return self._flush().sorted()

    def state_dict(self) -> dict[str, Any]:
        """Picklable state (numpy arrays and ints), e.g. for ``all_gather_object``."""
        records = self._flush()
        return {"version": STATE_VERSION, "index": records.index, "hist": records.hist,
                "adaptive": records.adaptive, "scalars": records.scalars,
                "extra": dict(records.extra), "next_index": self._next_index}

    @classmethod
    def from_states(cls, states: list[dict[str, Any]]) -> SODMetrics:
        """One accumulator holding the images of every state (e.g. each rank's, gathered)."""
        merged, parts = cls(), []
        for state in states:
            part = cls()
            part.load_state_dict(state)
            parts.append(part._flush())
            merged._next_index = max(merged._next_index, part._next_index)
        merged._parts = [Records.concatenate(parts)]  # one copy, not one per merge
        merged.families = resolve(list(merged._parts[0].extra))
        return merged

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace this accumulator's images by those of ``state``."""
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported SODMetrics state version {state.get('version')!r}")
        records = Records(*(np.asarray(state[name]) for name in
                            ("index", "hist", "adaptive", "scalars")),
                          extra={k: np.asarray(v) for k, v in state.get("extra", {}).items()})
        self.reset()
        self.families = resolve(list(records.extra))
        self._parts = [records]
        self._next_index = int(state["next_index"])
