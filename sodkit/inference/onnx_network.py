"""An ONNX graph run by onnxruntime, in the shape of a network: ``images -> {"logits": ...}``.

:func:`~sodkit.inference.forward.predict_scores` calls a network and reads its ``logits`` (or
``coarse_logits``); :class:`OnnxNetwork` answers the same call from an onnxruntime session, so
everything around the forward (the transforms, test-time augmentation, the resize back, the
encoding, the decoding workers, the progress) is the same code whichever runtime runs it. The
graph (:mod:`sodkit.runners.onnx_cache` writes it) maps a normalised batch ``image`` (B, 3, H,
W), every axis symbolic, to the scores the pipeline's output side takes (``scores``).

Threads: ``intra_op_num_threads`` as asked, one inter-op thread, and the pool's threads do not
spin while they wait for work (``session.intra_op.allow_spinning`` 0): on a machine whose
cores other processes hold, spinning threads burn the time slices the working thread needs
(benchmarks/RESULTS.md, "Threads under load").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)

INPUT, OUTPUT = "image", "scores"


def session_options(threads: int, spinning: bool = False) -> Any:
    """onnxruntime's options for a CPU session: ``threads`` intra-op threads, one inter-op,
    spinning off unless asked, its own log kept to fatal errors (they come back as
    exceptions)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    options.add_session_config_entry("session.intra_op.allow_spinning",
                                     "1" if spinning else "0")
    return options


class OnnxNetwork(nn.Module):
    """A network whose forward is an onnxruntime session's run (no parameters, no gradient);
    ``coarse``: the graph's output is the pipeline's coarse logits (F3Net's)."""

    def __init__(self, path: Path, threads: int, coarse: bool = False,
                 spinning: bool = False) -> None:
        super().__init__()
        import onnxruntime as ort

        self.path = Path(path)
        self.threads = threads
        self.coarse = coarse
        self.session = ort.InferenceSession(str(path), session_options(threads, spinning),
                                            providers=["CPUExecutionProvider"])

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
