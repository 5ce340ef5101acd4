"""``eval.at_start``: the starting model's numbers, measured before the first step (epoch 0).

A fine-tuning run (``model.init_from``) thus shows where it started next to where it ended: the
numbers go to the log, to TensorBoard at step 0 (``eval/<dataset>/<metric>``, the same tags as
every later evaluation), to ``results_start.json`` in the run folder (``results.json``'s shape)
and, from there, to the run report as the row ``<run> (epoch 0)``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..config import Config
    from .runtime import Runtime

logger = logging.getLogger(__name__)

FILE = "results_start.json"


def record_start(scalars: dict[str, dict[str, float]], run_dir: Path, tb: Any) -> None:
    """Log, plot (step 0) and write the starting model's numbers (rank 0)."""
    from ..metrics.keys import summary_line
    from ..outputs import OutputFolder

    for name, values in scalars.items():
        tb.scalars({f"eval/{name}/{k}": v for k, v in values.items()}, 0)
        logger.info("epoch 0 (the starting model): %s: %s", name, summary_line(values))
    tb.flush()
    plain = {str(d): {str(k): float(v) for k, v in m.items()} for d, m in scalars.items()}
    OutputFolder.at(run_dir).write_text(run_dir / FILE, json.dumps(plain, indent=2) + "\n")


def evaluate_start(model: Any, loaders: list[Any], rt: Runtime, cfg: Config, run_dir: Path,
                   tb: Any, stop: Callable[[], bool]) -> dict[str, dict[str, float]] | None:
    """Evaluate the starting model (the trainer passes its EMA copy when it keeps one: the same
    weights before the first step) on every rank; the numbers on every rank (kept in
    checkpoints, so a resumed run does not measure them again), None without test sets."""
    from .evaluator import evaluate

    if not loaders:
        logger.warning("eval.at_start: no test sets (data.test, data.val_fraction) to evaluate on")
        return None
    rt.broadcast_buffers(model)
    result = evaluate(model, loaders, rt, cfg, None, stop=stop)
    scalars = None
    if rt.is_main:
        scalars = result.scalars()
        record_start(scalars, run_dir, tb)
    return rt.broadcast_object(scalars)
