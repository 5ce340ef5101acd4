"""Argument and setup pieces shared by the sub-commands (light imports only at module level)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:

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
