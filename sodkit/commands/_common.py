"""Argument and setup pieces shared by the sub-commands (light imports only at module level)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from ..config import Config


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML recipe, e.g. configs/demo.yaml")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="dotted overrides, e.g. train.epochs=2 data.size=256 model.backbone=resnet34",
    )


def load_cli_config(args: argparse.Namespace) -> Config:
    from ..config import load_config

    return load_config(args.config, args.overrides)


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.output_root) / cfg.name


def add_weights_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", choices=["auto", "ema", "model"], default="auto",
                        help="which weights of the checkpoint: the EMA average (train.ema_decay) "
                             "or the trained model; auto: ema when the checkpoint has it")


def pick_weights(state: dict[str, Any], which: str, source: Path) -> tuple[str, dict[str, Any]]:
    """``(name, state dict)`` of the weights ``--weights`` asks for."""
    from ..errors import UserError

    ema = state.get("ema")
    if which == "ema" and not ema:
        raise UserError(f"{source} has no EMA weights (trained without train.ema_decay); "
                        f"use --weights model")
    if which != "model" and ema:
        return "ema", ema["model"]
    return "model", state["model"]


def load_weights(model: nn.Module, state: dict[str, Any], source: Path, which: str = "auto"
                 ) -> str:
    """Load a checkpoint's weights (``which``: auto | ema | model), explaining a mismatch in
    terms of the config; returns which weights were loaded."""
    from ..errors import UserError

    name, weights = pick_weights(state, which, source)
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        saved = state.get("config", {}).get("model", {})
        raise UserError(
            f"{source} does not fit the configured model ({exc.__class__.__name__}). The "
            f"checkpoint was trained with model={saved}; set the same model.* keys."
        ) from exc
    return name
