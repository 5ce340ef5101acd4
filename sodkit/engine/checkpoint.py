"""Run-folder checkpoints: ``last.pt`` every few epochs, ``best.pt`` by the chosen metric.

Only rank 0 writes, and every write is atomic (see :func:`~sodkit.torchfile.save_atomic`), so a
crash or a preemption in the middle of a save leaves the previous file intact.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ..config import ConfigError, EvalCfg
from ..config.loader import unknown_value_message
from ..errors import UserError
from ..torchfile import load_checkpoint, save_atomic
from .runtime import Runtime

logger = logging.getLogger(__name__)

LOWER_IS_BETTER = ("MAE", "BER")  # metric names ending in these are minimised


class CheckpointManager:
    def __init__(self, folder: Path, runtime: Runtime) -> None:
        self.folder = folder
        self.runtime = runtime

    @property
    def last(self) -> Path:
        return self.folder / "last.pt"

    @property
    def best(self) -> Path:
        return self.folder / "best.pt"

    def save_last(self, state: dict[str, Any]) -> None:
        if self.runtime.is_main:
            save_atomic(state, self.last)
            logger.info("saved %s (epoch %d, step %d)", self.last, state["epoch"], state["step"])
        self.runtime.barrier()

    def save_snapshot(self, state: dict[str, Any]) -> None:
        """A kept copy of this epoch's state, ``epoch_NNNN.pt``, that later saves never replace."""
        if self.runtime.is_main:
            save_atomic(state, self.folder / f"epoch_{state['epoch']:04d}.pt")

    def save_best(self, state: dict[str, Any]) -> None:
        if self.runtime.is_main:
            save_atomic(state, self.best)

    def resolve_resume(self, resume: str | None) -> Path | None:
        """``auto``: this run's ``last.pt`` if it exists, else a fresh start; a path must exist."""
        if resume is None:
            return None
        if resume == "auto":
            if self.last.is_file():
                return self.last
            logger.info("--resume auto: no %s yet, starting a new run", self.last)
            return None
        path = Path(resume)
        if not path.is_file():
            raise UserError(f"--resume: checkpoint not found: {path}")
        return path

    def load(self, path: Path) -> dict[str, Any]:
        return load_checkpoint(path)

    @staticmethod
    def check_selection(cfg: EvalCfg, datasets: list[str]) -> None:
        """Fail before training, not at the first evaluation, on a bad metric or dataset name."""
        from ..metrics import METRIC_KEYS

        if cfg.metric not in METRIC_KEYS:
            raise ConfigError(unknown_value_message("eval.metric", cfg.metric, METRIC_KEYS))
        if cfg.metric_dataset is not None and datasets and cfg.metric_dataset not in datasets:
            raise ConfigError(unknown_value_message("eval.metric_dataset", cfg.metric_dataset,
                                                    datasets))

    @staticmethod
    def score(scalars: dict[str, dict[str, float]], cfg: EvalCfg) -> float:
        """The value that ranks checkpoints: one dataset's metric, or its mean over test sets."""
        if cfg.metric_dataset is not None:  # checked by check_selection
            return scalars[cfg.metric_dataset][cfg.metric]
        values = [values[cfg.metric] for values in scalars.values()]
        return sum(values) / len(values)

    @staticmethod
    def is_better(value: float, best: dict[str, Any] | None, metric: str) -> bool:
        if not math.isfinite(value):
            return False
        if best is None:
            return True
        if metric.endswith(LOWER_IS_BETTER):
            return value < best["value"]
        return value > best["value"]
