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
from typing import Any

logger = logging.getLogger(__name__)

FILE = "results_start.json"
_SHOWN = ("MAE", "Smeasure", "wFmeasure", "maxFm", "maxEm")


def record_start(scalars: dict[str, dict[str, float]], run_dir: Path, tb: Any) -> None:
    """Log, plot (step 0) and write the starting model's numbers (rank 0)."""
    from ..outputs import OutputFolder

    for name, values in scalars.items():
        tb.scalars({f"eval/{name}/{k}": v for k, v in values.items()}, 0)
        shown = ", ".join(f"{k} {values[k]:.4f}" for k in _SHOWN if k in values)
        logger.info("epoch 0 (the starting model): %s: %s", name, shown)
    tb.flush()
    plain = {str(d): {str(k): float(v) for k, v in m.items()} for d, m in scalars.items()}
    OutputFolder.at(run_dir).write_text(run_dir / FILE, json.dumps(plain, indent=2) + "\n")
