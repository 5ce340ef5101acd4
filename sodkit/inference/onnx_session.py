"""An onnxruntime session on the CPU, opened the one way sodkit opens them: by
:class:`~sodkit.inference.onnx_network.OnnxNetwork` (the graph as a network) and by the start
that imports no torch (:mod:`sodkit.commands.predict_lean`). Imports onnxruntime only when a
session is opened.

Threads: ``intra_op_num_threads`` as asked, one inter-op thread, and the pool's threads do not
spin while they wait for work (``session.intra_op.allow_spinning`` 0): on a machine whose
cores other processes hold, spinning threads burn the time slices the working thread needs
(benchmarks/RESULTS.md, "Threads under load").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


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


def open_session(path: str | Path, threads: int, spinning: bool = False) -> Any:
    """An onnxruntime session of the graph at ``path`` on the CPU (:func:`session_options`)."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), session_options(threads, spinning),
                                providers=["CPUExecutionProvider"])
