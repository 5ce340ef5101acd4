"""``data.val_fraction``: training pairs held out as the test set ``val``.

A pair is held out when a hash of its stem falls below the fraction, so the choice is
deterministic and depends on nothing but the stem: adding files to the folder never moves a
pair between the two sets (only the new ones are placed), and every process of a distributed
run makes the same split. The held-out pairs are evaluated like any test set (metrics,
predictions, ``eval.metric_dataset: val`` for ``best.pt``) and are never trained on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

from ..errors import DataError

NAME = "val"  # the held-out test set's name
P = TypeVar("P")  # a pair: anything with a .stem


def held_out(stem: str, fraction: float) -> bool:
    """Whether the pair named ``stem`` belongs to the held-out share ``fraction``."""
    digest = hashlib.sha256(stem.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def split_pairs(pairs: Sequence[P], fraction: float | None) -> tuple[list[P], list[P]]:
    """``(train, val)``; ``fraction`` None or 0 holds out nothing.

    Raises:
        DataError: no pair is held out (the set is too small for the fraction), or every pair is.
    """
    if not fraction:
        return list(pairs), []
    train = [p for p in pairs if not held_out(p.stem, fraction)]  # type: ignore[attr-defined]
    val = [p for p in pairs if held_out(p.stem, fraction)]  # type: ignore[attr-defined]
    if not val:
        raise DataError(
            f"data.val_fraction={fraction}: none of the {len(pairs)} training pairs is held out "
            f"(about {fraction * len(pairs):.2g} expected; the choice is by a hash of each "
            f"stem): the set is too small to hold out a pair at this fraction; raise "
            f"data.val_fraction, or give a test set in data.test instead")
    if not train:
        raise DataError(f"data.val_fraction={fraction} holds out all {len(pairs)} training pairs, "
                        f"leaving none to train on; lower it")
    return train, val
