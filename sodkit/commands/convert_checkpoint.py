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


def run(args: argparse.Namespace) -> int:
    from ..torchfile import convert_legacy, load_checkpoint

    for path in args.checkpoints:
        converted = convert_legacy(path)
        load_checkpoint(converted)  # proves the result reads weights-only
        logger.info("converted %s (original kept as %s.orig)", converted, converted.name)
    return 0
