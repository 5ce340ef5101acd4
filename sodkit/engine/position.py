"""Where a run stands, said one way in every log line (#28): ``epoch 2/4 step 5/12``.

The epoch is counted from 1 and is the epoch that the last step done belongs to, the step is
the number of optimizer steps done out of the run's total. The progress lines, the checkpoint
saves, a resume and an evaluation of a checkpoint all say it so: ``epoch 2/4 step 5/12`` is
followed by ``saved .../last.pt (epoch 2/4 step 5/12)``, never by ``(epoch 1, step 5)`` (a
checkpoint's ``epoch`` field counts the epochs completed, which is another number mid-epoch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def position(epoch: int, epochs: int, step: int, total_steps: int) -> str:
    """``epoch E/N step S/T``: ``epoch`` counted from 1, ``step`` the steps done."""
    return f"epoch {epoch}/{epochs} step {step}/{total_steps}"


def training_position(epochs_done: int, epoch_step: int, epochs: int, step: int,
                      steps_per_epoch: int) -> str:
    """:func:`position` from a trainer's or a checkpoint's counters: ``epochs_done`` completed
    epochs and ``epoch_step`` steps into the next one (0 at an epoch's end)."""
    epoch = epochs_done + 1 if epoch_step else epochs_done
    return position(epoch, epochs, step, epochs * steps_per_epoch)


def checkpoint_position(state: Mapping[str, Any]) -> str:
    """:func:`training_position` of a checkpoint, or ``epoch E step S`` for one that lacks the
    run's length (a checkpoint of an older sodkit, a weights-only file)."""
    try:
        config = state.get("config") or {}
        epochs = config.get("train", {}).get("epochs") if isinstance(config, Mapping) else None
        steps_per_epoch = state.get("steps_per_epoch")
        if not epochs or not steps_per_epoch or "epoch" not in state or "step" not in state:
            parts = [f"{key} {state[key]}" for key in ("epoch", "step") if key in state]
            return " ".join(parts) or "position unknown"
        return training_position(int(state["epoch"]), int(state.get("epoch_step") or 0),
                                 int(epochs), int(state["step"]), int(steps_per_epoch))
    except (AttributeError, TypeError, ValueError):  # a file of any origin: not a traceback
        return "position unknown"
