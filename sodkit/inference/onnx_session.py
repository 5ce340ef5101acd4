"""An onnxruntime session on the CPU, opened the one way sodkit opens them: by
:class:`~sodkit.inference.onnx_network.OnnxNetwork` (the graph as a network) and by the start
that imports no torch (:mod:`sodkit.commands.predict_lean`). Imports onnxruntime only when a
session is opened.

Threads: ``intra_op_num_threads`` as asked, one inter-op thread, and the pool's threads do not
spin while they wait for work (``session.intra_op.allow_spinning`` 0): on a machine whose
cores other processes hold, spinning threads burn the time slices the working thread needs
(benchmarks/RESULTS.md, "Threads under load").

A cached graph's session can keep its optimised graph (``optimised``: where): onnxruntime's
graph optimisations were most of a session's start (MINet-R50: 3.5-4.9 s to open the graph,
0.9-1.1 s to open its optimised copy with the optimisations off, the same scores to the bit).
The copy holds this CPU's kernels (onnxruntime's NCHWc layouts), so its name carries the CPU's
features and onnxruntime's version (:func:`sodkit.runners.onnx_cache.optimised_path`); it is
written whole or not at all (:func:`sodkit.atomic.atomic_target`) by the first session, and a
copy that does not open is opened around.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)
CPU = ["CPUExecutionProvider"]


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


def open_session(path: str | Path, threads: int, spinning: bool = False,
                 optimised: Path | None = None) -> Any:
    """An onnxruntime session of the graph at ``path`` on the CPU (:func:`session_options`);
    ``optimised``: where its optimised copy is kept (read when it is there, else written)."""
    import onnxruntime as ort

    if optimised is not None and optimised.is_file():
        options = session_options(threads, spinning)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(str(optimised), options, providers=CPU)
        except Exception as exc:  # noqa: BLE001 - a damaged copy: the graph itself
            logger.debug("the optimised graph %s does not open: %s", optimised, exc)
    if optimised is None:
        return ort.InferenceSession(str(path), session_options(threads, spinning),
                                    providers=CPU)
    from ..atomic import atomic_target

    try:
        with atomic_target(optimised) as tmp:
            options = session_options(threads, spinning)
            options.optimized_model_filepath = str(tmp)
            return ort.InferenceSession(str(path), options, providers=CPU)
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be written, a graph
        # onnxruntime cannot save (over 2 GB): the session without the copy
        logger.debug("the optimised graph %s was not kept: %s", optimised, exc)
        return ort.InferenceSession(str(path), session_options(threads, spinning),
                                    providers=CPU)
