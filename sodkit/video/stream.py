"""Frames -> batches -> the network -> each frame's scores, as a stream.

The same transform, forward and resize as ``sodkit predict``'s images
(:mod:`sodkit.inference`): the pipeline's transform of each frame, one stacked forward pass a
batch (:func:`~sodkit.inference.forward.predict_scores`, TTA included), and the pipeline's
output side at the frame's size. So a frame's mask is the mask of the same frame saved as a PNG
and given to ``sodkit predict`` (to the float rounding of another batch's composition: at most
1/255, tested). A thread decodes up to two batches ahead (:func:`read_ahead`), so at most
three batches of decoded frames are held here at a time (and the writer's two waiting:
:class:`sodkit.video.write.Behind`), whatever the clip's length.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
import torch

from ..inference.forward import ForwardRuntime, eval_mode, predict_scores
from ..inference.pipelines import postprocess_of
from . import AHEAD


def read_ahead(frames: Iterator[np.ndarray], depth: int) -> Iterator[np.ndarray]:
    """``frames`` in order, decoded by a thread at most ``depth`` frames ahead (OpenCV's
    decoder releases the GIL: the next batch decodes during this one's forward pass and
    writing). Its error is raised here, after the frames before it; closed early, the thread
    stops and closes ``frames`` (releasing the video file)."""
    import queue
    import threading

    items: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()

    def offer(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for frame in frames:
                if not offer(("frame", frame)):
                    return
            offer(("end", None))
        except BaseException as exc:  # raised again in the consumer's thread
            offer(("error", exc))
        finally:
            close = getattr(frames, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="sodkit-frames", daemon=True)
    thread.start()
    try:
        while True:
            kind, item = items.get()
            if kind == "end":
                return
            if kind == "error":
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def batches(frames: Iterable[np.ndarray], size: int) -> Iterator[list[np.ndarray]]:
    """``frames`` in lists of ``size`` (the last one shorter), pulled lazily."""
    it = iter(frames)
    while chunk := list(islice(it, size)):
        yield chunk


def predict_stream(model: Any, frames: Iterable[np.ndarray],
                   transform: Callable[[np.ndarray], torch.Tensor], runtime: ForwardRuntime,
                   batch: int, tta: Sequence[str] = (), precision: str = "fp32"
                   ) -> Iterator[tuple[np.ndarray, torch.Tensor]]:
    """``(frame, scores)`` of each uint8 RGB frame in order: ``scores`` (1, C, h, w) on the
    model's device, what the pipeline's output side (``postprocess_of(transform)``) turns into
    the frame's mask (``to_mask``) or probability map (``probability_map``) at its size."""
    post = postprocess_of(transform)
    with eval_mode(model), contextlib.closing(read_ahead(iter(frames), AHEAD * batch)) as ahead:
        for chunk in batches(ahead, batch):
            stacked = torch.stack([transform(frame) for frame in chunk]).to(runtime.device)
            scores = predict_scores(model, stacked, runtime, post, precision, tta=tta)
            for i, frame in enumerate(chunk):
                yield frame, scores[i : i + 1]
