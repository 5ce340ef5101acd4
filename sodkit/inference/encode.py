"""One image's scores -> the PNG bytes of each ``--save`` kind: the one encoding ``sodkit
predict``'s files and the server's responses share, so they are the same bytes by construction.

The mask is the pipeline's own (its ``to_mask``: sodkit's rounds, MINet's and BiRefNet's
truncate, as their authors' masks); every other kind is a
:class:`~sodkit.inference.render.Rendering` of the probability map at the image's size, computed
once for all of them. Runs in the thread beside the next forward pass
(:mod:`sodkit.engine.overlap`) or in a request's thread (:mod:`sodkit.serve.model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..imageio import encode_mask

if TYPE_CHECKING:
    import torch

    from .postprocess import Postprocess
    from .render import Rendering

Outputs = Sequence[tuple[str, "Rendering | None"]]  # (kind, rendering; None: the uint8 mask)


def encode_outputs(post: Postprocess, scores: torch.Tensor, size: tuple[int, int],
                   outputs: Outputs, image: np.ndarray | None = None,
                   alpha: np.ndarray | None = None) -> list[tuple[str, bytes]]:
    """``(kind, PNG bytes)`` of each of ``outputs``, in order, for one image's ``scores``
    (1, C, h, w) at its ``size`` (H, W); ``image`` (uint8 RGB) and its ``alpha`` for the
    kinds that draw on the photo (cut-out, overlay)."""
    files, prob = [], None
    for kind, rendering in outputs:
        if rendering is None:
            files.append((kind, encode_mask(post.to_mask(scores, tuple(size)))))
            continue
        if prob is None:  # once for every rendering of the image
            prob = _numpy(post.probability_map(scores, tuple(size)))
        files.append((kind, rendering.png(prob, image, alpha)))
    return files


def output_arrays(post: Postprocess, scores: torch.Tensor, size: tuple[int, int],
                  outputs: Outputs, image: np.ndarray | None = None,
                  alpha: np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
    """``(kind, array)`` of each of ``outputs``: the pixels :func:`encode_outputs` encodes
    (the uint8 mask, the rendering of the probability map), for a writer that does not write
    PNG files (a video's frames: :mod:`sodkit.video.write`)."""
    arrays, prob = [], None
    for kind, rendering in outputs:
        if rendering is None:
            arrays.append((kind, post.to_mask(scores, tuple(size))))
            continue
        if prob is None:
            prob = _numpy(post.probability_map(scores, tuple(size)))
        arrays.append((kind, rendering.array(prob, image, alpha)))
    return arrays


def _numpy(prob: Any) -> np.ndarray:
    """A probability map as numpy: a tensor's copy on the CPU, or the array a numpy pipeline
    (:mod:`sodkit.inference.numpy_pipelines`) gave."""
    return prob if isinstance(prob, np.ndarray) else prob.cpu().numpy()
