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

    def forward(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        array = np.ascontiguousarray(images.detach().cpu().float().numpy())
        scores = torch.from_numpy(self.session.run([OUTPUT], {INPUT: array})[0])
        return {"logits": scores, "coarse_logits": scores} if self.coarse else {
            "logits": scores}
