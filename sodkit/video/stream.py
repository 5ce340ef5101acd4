"""Frames -> batches -> the network -> each frame's scores, as a stream.

The same transform, forward and resize as ``sodkit predict``'s images
(:mod:`sodkit.inference`): the pipeline's transform of each frame, one stacked forward pass a
batch (:func:`~sodkit.inference.forward.predict_scores`, TTA included), and the pipeline's
output side at the frame's size. So a frame's mask is the mask of the same frame saved as a PNG
and given to ``sodkit predict`` (to the float rounding of another batch's composition: at most
1/255, tested). At most ``batch`` decoded frames are held at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import numpy as np
import torch

from ..inference.forward import ForwardRuntime, eval_mode, predict_scores
from ..inference.pipelines import postprocess_of


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
    with eval_mode(model):
        for chunk in batches(frames, batch):
            stacked = torch.stack([transform(frame) for frame in chunk]).to(runtime.device)
            scores = predict_scores(model, stacked, runtime, post, precision, tta=tta)
            for i, frame in enumerate(chunk):
                yield frame, scores[i : i + 1]
