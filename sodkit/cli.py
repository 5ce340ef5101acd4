"""The ``sodkit`` command: parse arguments, then hand over to one module per sub-command.

Command modules import torch and friends inside ``run`` only, so ``sodkit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from . import __version__
from .errors import UserError

# sub-command -> module under sodkit.commands with HELP, add_arguments(parser), run(args) -> int
COMMANDS = ["train", "test", "predict", "eval", "bench", "info"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sodkit", description="Train, evaluate and run salient object detection models."
    )
    parser.add_argument("--version", action="version", version=f"sodkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"sodkit.commands.{name.replace('-', '_')}")
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"sodkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sodkit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
