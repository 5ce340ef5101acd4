"""argparse ``type`` callables shared by the commands and by the library's own option parsers
(report figures): a bad number or path is a usage error naming the option (exit 2), never a
traceback from deep inside a command. Standard library only, so that any layer may use them."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]`` (``high`` None: no upper bound).

    A value outside is a usage error that names the option and the range (exit 2), instead of
    a traceback from deep inside the command (``--batch-size 0``, ``--opset 999``).
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            allowed = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    parse.__name__ = "int"  # how argparse names the type in its own messages
    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[low, high]`` (``nan`` and ``inf`` refused:
    a NaN threshold would compare false everywhere and write empty masks)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:  # false for NaN
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {text}")
        return value

    parse.__name__ = "float"
    return parse


def user_path(text: str) -> str:
    """An argparse ``type`` for a path the user names: ``~`` is the home folder (the shell
    expands ``--out ~/x`` but leaves ``--out=~/x`` alone, which would create ``./~/x``)."""
    return os.path.expanduser(text)
