"""``eval.at_start``: the starting model's numbers, measured before the first step (epoch 0).

A fine-tuning run (``model.init_from``) thus shows where it started next to where it ended: the
numbers go to the log, to TensorBoard at step 0 (``eval/<dataset>/<metric>``, the same tags as
every later evaluation), to ``results_start.json`` in the run folder (``results.json``'s shape)
and, from there, to the run report as the row ``<run> (epoch 0)``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trainer import Trainer

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


def evaluate_start(trainer: Trainer) -> dict[str, dict[str, float]] | None:
    """Evaluate the trainer's starting model (its EMA copy when it keeps one: the same weights
    before the first step) on every rank; the numbers on every rank (kept in checkpoints, so a
    resumed run does not measure them again), None without test sets."""
    from .evaluator import evaluate

    rt, stop = trainer.runtime, trainer.stop
    if not trainer.test_loaders:
        logger.warning("eval.at_start: no test sets (data.test, data.val_fraction) to evaluate on")
        return None
    model = trainer.ema.module if trainer.ema is not None else trainer.model
    rt.broadcast_buffers(model)
    result = evaluate(model, trainer.test_loaders, rt, trainer.cfg, None,
                      stop=lambda: stop is not None and stop.received is not None)
    scalars = None
    if rt.is_main:
        scalars = result.scalars()
        record_start(scalars, trainer.run_dir, trainer.tb)
    return rt.broadcast_object(scalars)
