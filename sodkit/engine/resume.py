"""Whether a checkpoint can continue under today's config, checked before any step is taken.

A resumed run reproduces the uninterrupted one only with the same global batch and the same
schedule. What breaks that silently is refused in mid-epoch (the saved position in the epoch
would point at other images) and warned about at an epoch boundary, where it is a legitimate
change of plan (more epochs, another batch size).

A checkpoint of another network (another width, backbone or levels) cannot be loaded at all:
:func:`load_model_state` says so in one line naming the ``model.*`` keys that differ, instead
of torch's dump of every tensor that does not fit.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config, to_dict
from ..errors import UserError
from ..text import plural

if TYPE_CHECKING:
    from torch import nn

logger = logging.getLogger(__name__)


def _settings(cfg: dict[str, Any], world_size: int) -> dict[str, Any]:
    return {"data.batch_size": cfg["data"]["batch_size"],
            "train.accumulate": cfg["train"]["accumulate"],
            "processes (world size)": world_size}


def check_resume(state: dict[str, Any], cfg: Config, world_size: int,
                 steps_per_epoch: int) -> None:
    """Refuse or warn about differences between the checkpoint's run and this one."""
    saved_cfg = state.get("config") or {}
    try:
        saved_world = int(state.get("world_size", 1))
        before = _settings(saved_cfg, saved_world)
        saved_epochs = saved_cfg["train"]["epochs"]
    except (KeyError, TypeError, ValueError):  # no config, or not one sodkit wrote
        return
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
    if saved_epochs != cfg.train.epochs:
        logger.warning("train.epochs %s -> %d: the LR schedule is recomputed for the new length, "
                       "so the LR jumps at the resume point", saved_epochs, cfg.train.epochs)


# model.* keys that change the network's tensors (the others: weights source, checkpointing,
# frozen parameters, leave every shape as it is)
ARCHITECTURE_KEYS = ("name", "backbone", "decoder_channels", "out_indices", "backbone_kwargs")


def model_differences(saved_cfg: dict[str, Any], cfg: Config) -> list[str]:
    """``model.KEY A -> B`` for each architecture key the checkpoint's config sets otherwise."""
    saved = saved_cfg.get("model") if isinstance(saved_cfg, dict) else None
    if not isinstance(saved, dict):  # a file of any origin: nothing to compare, no traceback
        return []
    now = to_dict(cfg.model)
    return [f"model.{key} {saved[key]!r} -> {now[key]!r}" for key in ARCHITECTURE_KEYS
            if key in saved and saved[key] != now[key]]


def describe_mismatch(model: nn.Module, weights: dict[str, Any]) -> str:
    """What does not fit, tensor-wise: counts and the first tensor of another shape."""
    mine = model.state_dict()
    shapes = [k for k in mine if k in weights and tuple(mine[k].shape) != tuple(weights[k].shape)]
    missing = sum(k not in weights for k in mine)
    unexpected = sum(k not in mine for k in weights)
    first = (f" (e.g. {shapes[0]}: {list(weights[shapes[0]].shape)} in the checkpoint, "
             f"{list(mine[shapes[0]].shape)} here)" if shapes else "")
    return (f"{plural(len(shapes), 'tensor')} of another shape{first}, {missing} missing, "
            f"{unexpected} not in this network")


def load_model_state(model: nn.Module, state: dict[str, Any], cfg: Config,
                     source: str | Path = "the checkpoint") -> None:
    """``model.load_state_dict(state["model"])``; a checkpoint of another network is a one-line
    ``UserError`` naming the ``model.*`` keys that differ (from the checkpoint's stored config)
    and what does not fit, instead of torch's dump of every tensor.

    ``train --resume``: ``Trainer.load_state_dict`` calls it for the model's weights."""
    tensors = state["model"]
    try:
        model.load_state_dict(tensors)
    except RuntimeError:
        changed = model_differences(state.get("config") or {}, cfg)
        why = (f"was trained with another network ({', '.join(changed)})" if changed
               else "holds another network's weights")
        raise UserError(f"{source} {why}: {describe_mismatch(model, tensors)}; use the "
                        f"checkpoint's model.* settings, or start a new run") from None
