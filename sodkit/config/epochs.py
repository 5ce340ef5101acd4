"""Settings counted in epochs that a run never reaches (#32 item 6: a ``loss.schedule`` phase
from epoch 5 of a 1-epoch run was accepted and never applied).

Each is legal (a recipe written for 500 epochs keeps its numbers when a smoke test sets
``train.epochs=1``), so :func:`epoch_warnings` gives one warning line per setting that will not
take effect, and ``sodkit train`` logs them before any data is read. A warm-up longer than the
run is refused by the loader (the LR would never reach ``optim.lr``). A step milestone at ten
times the run's length or more is the idiom for "never" (BiRefNet's ``lr_decay_epochs =
[1e5]``) and is not warned about.
"""

from __future__ import annotations

from ..text import plural
from .schema import Config

NEVER = 10  # a milestone this many times the run's length means "never"


def epoch_warnings(cfg: Config) -> list[str]:
    """One line for each epoch-counted setting that lies beyond ``train.epochs``."""
    epochs = cfg.train.epochs
    run = f"the run's last epoch (train.epochs {epochs})"
    lines = []
    for i, phase in enumerate(cfg.loss.schedule):
        if phase.from_epoch > epochs:
            lines.append(f"loss.schedule.{i}: from epoch {phase.from_epoch}, after {run}: it "
                         f"never applies (-N counts the last N epochs)")
    if cfg.schedule.name == "step":
        late = [m for m in cfg.schedule.milestones if epochs < m < NEVER * epochs]
        if late:
            lines.append(f"schedule.milestones: {', '.join(f'{m:g}' for m in late)} after "
                         f"{run}: the LR is never decayed there (-N counts the last N epochs)")
    length = f"longer than the run ({plural(epochs, 'epoch')})"
    if cfg.eval.every > epochs:
        lines.append(f"eval.every: {cfg.eval.every}, {length}: only the final evaluation runs")
    if cfg.train.keep_every > epochs:
        lines.append(f"train.keep_every: {cfg.train.keep_every}, {length}: no epoch snapshot "
                     f"is kept")
    if cfg.train.checkpoint_every > epochs:
        lines.append(f"train.checkpoint_every: {cfg.train.checkpoint_every}, {length}: a "
                     f"checkpoint is saved at its end only")
    return lines
