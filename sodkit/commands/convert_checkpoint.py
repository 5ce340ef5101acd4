"""``sodkit convert-checkpoint``: rewrite checkpoints of sodkit 0.1 in today's format, once.

sodkit 0.1 pickled numpy's RNG state as an array, which ``torch.load(weights_only=True)`` does
not read. This command reads such a file with the weights-only unpickler plus numpy's array
globals (data, never code), stores the state as tensors and plain values, and keeps the original
beside it as ``<name>.orig``. A file that needs any other pickled object is still refused.
"""

from __future__ import annotations

import argparse
import logging

HELP = "convert checkpoints written by sodkit 0.1 so that they load safely (once per file)"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoints", nargs="+", metavar="PATH",
                        help=".pt files written by sodkit 0.1 (each converted in place)")


def check_paths(paths: list[str]) -> None:
    """Every file is there and has no ``.orig`` beside it, before the first is converted."""
    from pathlib import Path

    from ..errors import UserError

    for path in map(Path, paths):
        if not path.is_file():
            raise UserError(f"{path}: " + ("a folder; give the .pt files" if path.is_dir()
                                           else "file not found") + "; nothing converted")
        backup = path.with_name(path.name + ".orig")
        if backup.exists():
            raise UserError(f"{backup} exists already; move it away first (it may be the "
                            f"original of an earlier conversion); nothing converted")


def run(args: argparse.Namespace) -> int:
    check_paths(args.checkpoints)  # names and paths first, before torch is imported
    from ..progress import Progress
    from ..text import plural
    from ..torchfile import convert_legacy, load_checkpoint

    logger.info("convert-checkpoint: %s, each rewritten in place (original kept as .orig) and "
                "read back weights-only", plural(len(args.checkpoints), "file"))
    with Progress(len(args.checkpoints), "convert-checkpoint", unit="file",
                  summary=True) as progress:
        for path in args.checkpoints:
            converted = convert_legacy(path)
            load_checkpoint(converted)  # proves the result reads weights-only
            logger.info("converted %s (original kept as %s.orig)", converted, converted.name)
            progress.update()
    return 0
