"""``sodkit info CONFIG|CHECKPOINT``: parameters, FLOPs at the input size, feature maps, what is
registered; of a recipe's network, or of the network a checkpoint or model file holds (its
stored config, with the overrides on top). ``--json`` adds ``config``: what ``sodkit train``
of the same arguments runs (of a checkpoint or model file, its fine-tuning recipe:
:mod:`sodkit.finetune`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import add_config_arguments, load_cli_config

if TYPE_CHECKING:
    from ..config import Config

HELP = ("parameters, FLOPs at the input size and feature maps of a config's network, or of a "
        "checkpoint's or model file's; --json adds the config `sodkit train` would run")
CHECKPOINT_SUFFIXES = (".pt", ".pth", ".safetensors")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def checkpoint_source(args: argparse.Namespace) -> tuple[Config, dict[str, Any]]:
    """The config stored in the checkpoint or model file ``args.config`` (overrides applied and
    checked like a recipe's, its network's size bounded), and what the file says about its
    weights."""
    from ..trained import read_trained

    stored = read_trained(args.config, overrides=args.overrides)
    state, path = stored.state, stored.source
    if state.get("model_file"):
        about = {"file": str(path), "kind": "model file", **stored.provenance}
    else:
        about = {"file": str(path), "kind": "checkpoint", "epoch": state.get("epoch"),
                 "step": state.get("step"), "ema": bool(state.get("ema")),
                 "training_state": "optimizer" in state}
    return stored.config, about


def run(args: argparse.Namespace) -> int:
    from ..config import to_dict
    from ._common import recipe_source

    about = None
    args.config = str(recipe_source(args.config))  # a model's name: its cached model file
    if Path(args.config).suffix.lower() in CHECKPOINT_SUFFIXES:
        cfg, about = checkpoint_source(args)
    else:
        cfg = load_cli_config(args)

    from ..engine.info import describe, format_description

    info = describe(cfg)
    if about is not None:
        info = {"source": about, **info}
    if args.json:  # what `sodkit train` of the same arguments would run
        info["config"] = to_dict(load_cli_config(args) if about is not None else cfg)
    print(json.dumps(info, indent=2) if args.json else format_description(info))
    return 0
