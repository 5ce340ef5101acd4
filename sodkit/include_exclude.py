"""The ``--include-<kind>`` / ``--exclude-<kind>`` rule (#25), one for ``sodkit eval`` (methods
and datasets to measure, :mod:`sodkit.evaluation.selection`) and ``sodkit report`` (methods and
datasets to show, :mod:`sodkit.report.selection`): names as the results hold them, a name that
matches nothing an error naming the known ones (a typo must not silently keep everything),
nothing left an error. Standard library only: a rule of both, below both.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .errors import UserError


def names_option(text: str) -> list[str]:
    """``A,B,C`` -> ``["A", "B", "C"]`` (argparse type; empty names refused)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME,NAME,... with no empty name")
    return names


def select(names: Sequence[str], include: Sequence[str] | None, exclude: Sequence[str] | None,
           what: str) -> list[str]:
    """``names`` (in their order) kept by ``--include-<what>`` and ``--exclude-<what>``.

    Raises:
        UserError: a name in either option matches none of ``names``, or nothing is left.
    """
    for option, asked in (("include", include), ("exclude", exclude)):
        unknown = [name for name in asked or () if name not in names]
        if unknown:
            raise UserError(f"--{option}-{what} {','.join(unknown)}: no such {what[:-1]}; "
                            f"known: {', '.join(names)}")
    kept = [n for n in names if (include is None or n in include) and n not in (exclude or ())]
    if not kept:
        raise UserError(f"--include-{what} / --exclude-{what} leave no {what[:-1]} to evaluate")
    return kept
