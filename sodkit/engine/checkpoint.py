"""Run-folder checkpoints: ``step_NNNNNNNN.pt`` at epoch ends, every few steps or minutes and on
preemption (the newest few kept), ``last.pt`` the newest of them, ``best.pt`` by the chosen metric.

``best.pt`` holds what evaluation and fine-tuning read (:data:`BEST_KEYS`: the weights, the EMA,
the config, the epoch, step and best score), not the optimizer, scheduler, scaler or RNG state of
the run: those are for resuming, which reads ``last.pt`` and the step files only.

Only rank 0 writes, and every write is atomic (see :func:`~sodkit.torchfile.save_atomic`), so a
crash or a preemption in the middle of a save leaves the previous file intact.
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ..config import ConfigError, EvalCfg
from ..config.loader import unknown_value_message
from ..errors import UserError
from ..torchfile import load_checkpoint, save_atomic
from .position import checkpoint_position
from .runtime import Runtime

logger = logging.getLogger(__name__)

# what best.pt keeps of the trainer's state (a 2-step ConvNeXt-T run's optimizer state doubled it)
BEST_KEYS = ("format", "model", "ema", "config", "epoch", "evaluated", "step", "steps_per_epoch",
             "best", "world_size")
_STEP_FILE = re.compile(r"^step_\d{8}\.pt$")
# torchfile.save_atomic's and _link_atomic's temporary names: .NAME.tmp-PID, .NAME.link-PID
_TEMP_FILE = re.compile(r"^\..+\.(?:tmp|link)-(\d+)$")


def _running(pid: int) -> bool:
    """Whether a process of this id runs on this machine (then its write may be in progress)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _link_atomic(target: Path, link: Path) -> None:
    """``link`` becomes another name of ``target`` (a copy where hard links are not supported)."""
    tmp = link.with_name(f".{link.name}.link-{os.getpid()}")
    tmp.unlink(missing_ok=True)
    try:
        os.link(target, tmp)
    except OSError:
        shutil.copy2(target, tmp)
    os.replace(tmp, link)


class CheckpointManager:
    def __init__(self, folder: Path, runtime: Runtime, keep: int = 2) -> None:
        self.folder = folder
        self.runtime = runtime
        self.keep = keep  # step files kept (train.keep_checkpoints)

    @property
    def last(self) -> Path:
        return self.folder / "last.pt"

    @property
    def best(self) -> Path:
        return self.folder / "best.pt"

    def save_last(self, state: dict[str, Any]) -> None:
        """``step_NNNNNNNN.pt`` and ``last.pt`` (a hard link to it); the newest ``keep`` step
        files stay, so a damaged newest file leaves a previous one to resume from."""
        if self.runtime.is_main:
            path = self.folder / f"step_{state['step']:08d}.pt"
            save_atomic(state, path)
            _link_atomic(path, self.last)
            self._prune()
            logger.info("saved %s (%s)", self.last, checkpoint_position(state))
        self.runtime.barrier()

    def remove_stale_files(self) -> None:
        """Remove what a process killed in the middle of a write left: ``save_atomic``'s and
        ``_link_atomic``'s temporary files of processes that no longer run (rank 0, before its
        first save)."""
        if not self.folder.is_dir():
            return
        for path in self.folder.iterdir():
            match = _TEMP_FILE.match(path.name)
            if match and not _running(int(match.group(1))) and path.is_file():
                path.unlink(missing_ok=True)
                logger.info("removed %s, left by an interrupted write", path)

    def step_files(self) -> list[Path]:
        """This run's step checkpoints, newest first."""
        return sorted((p for p in self.folder.glob("step_*.pt") if _STEP_FILE.match(p.name)),
                      reverse=True)

    def _prune(self) -> None:
        for old in self.step_files()[self.keep:]:
            old.unlink(missing_ok=True)

    def save_snapshot(self, state: dict[str, Any]) -> None:
        """A kept copy of this epoch's state, ``epoch_NNNN.pt``, that later saves never replace."""
        if self.runtime.is_main:
            save_atomic(state, self.folder / f"epoch_{state['epoch']:04d}.pt")

    def save_best(self, state: dict[str, Any]) -> None:
        """``best.pt``: the :data:`BEST_KEYS` of ``state`` (no resumable training state)."""
        if self.runtime.is_main:
            save_atomic({key: state[key] for key in BEST_KEYS if key in state}, self.best)

    def load_resume(self, resume: str | None) -> tuple[Path, dict[str, Any]] | None:
        """The checkpoint to resume from and its state, or None for a fresh start.

        ``auto``: the newest readable of ``last.pt`` and the kept step files (a truncated or
        corrupt newest file is skipped with a warning that names it), nothing when the run has
        no checkpoint yet. A path must be a readable checkpoint.
        """
        if resume is None:
            return None
        if resume != "auto":
            state = load_checkpoint(resume)
            if state.get("model_file"):
                raise UserError(f"--resume {resume}: a model file holds weights, not a run's "
                                f"training state; start a run from it with model.init_from")
            if "optimizer" not in state:
                raise UserError(f"--resume {resume}: it holds weights, not a run's training "
                                f"state (best.pt keeps no optimizer state); resume from "
                                f"last.pt or a step_*.pt file, or start a run from it with "
                                f"model.init_from")
            return Path(resume), state
        candidates = [p for p in (self.last, *self.step_files()) if p.is_file()]
        for path in candidates:
            try:
                state = load_checkpoint(path)
            except UserError as exc:
                logger.warning("--resume auto: skipping %s: %s", path, exc)
                continue
            if path != candidates[0]:
                logger.warning("--resume auto: resuming from the previous good checkpoint %s "
                               "(step %d)", path, state["step"])
            return path, state
        if candidates:
            raise UserError(f"--resume auto: no readable checkpoint in {self.folder} (tried "
                            f"{', '.join(p.name for p in candidates)}); resume from a file with "
                            f"--resume PATH or start over with --overwrite")
        logger.info("--resume auto: no checkpoint in %s yet, starting a new run", self.folder)
        return None

    def load(self, path: Path) -> dict[str, Any]:
        return load_checkpoint(path)

    @staticmethod
    def check_selection(cfg: EvalCfg, datasets: list[str]) -> None:
        """Fail before training, not at the first evaluation, on a bad metric or dataset name."""
        from ..metrics.keys import families_with, selectable_keys

        keys = selectable_keys()  # the standard set's and every family's
        if cfg.metric not in keys:
            raise ConfigError(unknown_value_message("eval.metric", cfg.metric, keys))
        try:  # a family's missing package: before training, not after
            families_with(cfg.compute, cfg.metric)
        except ValueError as exc:
            raise ConfigError(f"eval.compute: {exc}") from None
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
        """Whether ``value`` beats the best so far in ``metric``'s direction; a NaN never does,
        and says so (mBA is NaN when a GT has no boundary: best.pt would silently stay)."""
        if not math.isfinite(value):
            logger.warning("eval.metric %s is %s: it picks no best.pt this time", metric, value)
            return False
        if best is None:
            return True
        from ..metrics.keys import lower_is_better

        if lower_is_better(metric):
            return value < best["value"]
        return value > best["value"]
