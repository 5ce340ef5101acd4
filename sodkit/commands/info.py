"""``sodkit info CONFIG``: parameters, FLOPs at the input size, feature maps, what is registered."""

from __future__ import annotations

import argparse
import json

from ._common import add_config_arguments, load_cli_config

HELP = "parameters, FLOPs at the input size and feature maps of a config's network"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    cfg = load_cli_config(args)

    from ..engine.info import describe, format_description

    info = describe(cfg)
    print(json.dumps(info, indent=2) if args.json else format_description(info))
    return 0
