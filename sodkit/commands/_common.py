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


def load_weights(model: nn.Module, state: dict[str, Any], source: Path) -> None:
    """Load a checkpoint's weights, explaining a mismatch in terms of the config."""
    from ..errors import UserError

    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        saved = state.get("config", {}).get("model", {})
        raise UserError(
            f"{source} does not fit the configured model ({exc.__class__.__name__}). The "
            f"checkpoint was trained with model={saved}; set the same model.* keys."
        ) from exc
