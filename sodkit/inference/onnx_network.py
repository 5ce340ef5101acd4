"""An ONNX graph run by onnxruntime, in the shape of a network: ``images -> {"logits": ...}``.

:func:`~sodkit.inference.forward.predict_scores` calls a network and reads its ``logits`` (or
``coarse_logits``); :class:`OnnxNetwork` answers the same call from an onnxruntime session, so
everything around the forward (the transforms, test-time augmentation, the resize back, the
encoding, the decoding workers, the progress) is the same code whichever runtime runs it. The
graph (:mod:`sodkit.runners.onnx_cache` writes it) maps a normalised batch ``image`` (B, 3, H,
W), every axis symbolic, to the scores the pipeline's output side takes (``scores``).

The session and its threads: :mod:`sodkit.inference.onnx_session`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .onnx_session import open_session, session_options  # noqa: F401 - its home before

logger = logging.getLogger(__name__)

INPUT, OUTPUT = "image", "scores"


class OnnxNetwork(nn.Module):
    """A network whose forward is an onnxruntime session's run (no parameters, no gradient);
    ``coarse``: the graph's output is the pipeline's coarse logits (F3Net's); ``optimised``:
    where the session keeps its optimised graph (:func:`~sodkit.inference.onnx_session.
    open_session`)."""

    def __init__(self, path: Path, threads: int, coarse: bool = False,
                 spinning: bool = False, optimised: Path | None = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.threads = threads
        self.coarse = coarse
        self.session = open_session(path, threads, spinning, optimised)

    def memory_per_image(self, side: int, counter: Callable[[], int | None] | None = None
                         ) -> int | None:
        """Bytes one image at ``side`` x ``side`` adds to this session's memory: the growth of
        ``counter()`` (the caller's count of the bytes the process's allocations hold: glibc's,
        which onnxruntime's arena allocates from; default: the resident memory) over the
        session's first run at that side. The arena grows to the run's peak and keeps it, so
        the growth is the peak (rounded up to the arena's chunks); PyTorch's probe, which
        samples the heap after each PyTorch operation, cannot see it. Meant before any other
        run (a later one reuses the arena); None where nothing can be counted."""
        count = counter or _resident_bytes
        before = count()
        if before is None:
            return None
        self.session.run([OUTPUT], {INPUT: np.zeros((1, 3, side, side), np.float32)})
        after = count()
        return None if after is None else max(after - before, 0)

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        array = np.ascontiguousarray(images.detach().cpu().float().numpy())
        scores = torch.from_numpy(self.session.run([OUTPUT], {INPUT: array})[0])
        return {"logits": scores, "coarse_logits": scores} if self.coarse else {
            "logits": scores}


def _resident_bytes() -> int | None:
    import os

    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
