"""Whether a checkpoint can continue under today's config, checked before any step is taken.

A resumed run reproduces the uninterrupted one only with the same global batch and the same
schedule. What breaks that silently is refused in mid-epoch (the saved position in the epoch
would point at other images) and warned about at an epoch boundary, where it is a legitimate
change of plan (more epochs, another batch size).
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import Config
from ..errors import UserError

logger = logging.getLogger(__name__)


def _settings(cfg: dict[str, Any], world_size: int) -> dict[str, Any]:
    return {"data.batch_size": cfg["data"]["batch_size"],
            "train.accumulate": cfg["train"]["accumulate"],
            "processes (world size)": world_size}


def check_resume(state: dict[str, Any], cfg: Config, world_size: int,
                 steps_per_epoch: int) -> None:
    """Refuse or warn about differences between the checkpoint's run and this one."""
    saved_cfg = state.get("config") or {}
    if not saved_cfg:
        return
    saved_world = int(state.get("world_size", 1))
    before = _settings(saved_cfg, saved_world)
    now = {"data.batch_size": cfg.data.batch_size, "train.accumulate": cfg.train.accumulate,
           "processes (world size)": world_size}
    changed = {k: (before[k], now[k]) for k in now if before[k] != now[k]}
    saved_spe = int(state.get("steps_per_epoch") or steps_per_epoch)
    mid_epoch = state["step"] != state["epoch"] * saved_spe
    if saved_spe != steps_per_epoch:
        changed["steps per epoch"] = (saved_spe, steps_per_epoch)
    shown = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
    if changed and mid_epoch:
        raise UserError(
            f"the checkpoint stopped in mid-epoch (step {state['step']}) under other settings "
            f"({shown}): its place in the epoch would point at other images. Resume with the "
            f"checkpoint's settings, or from an epoch checkpoint")
    if changed:
        logger.warning("resuming with other settings (%s): the run goes on, but it will not "
                       "reproduce an uninterrupted run", shown)
    if saved_cfg["train"]["epochs"] != cfg.train.epochs:
        logger.warning("train.epochs %d -> %d: the LR schedule is recomputed for the new length, "
                       "so the LR jumps at the resume point", saved_cfg["train"]["epochs"],
                       cfg.train.epochs)
