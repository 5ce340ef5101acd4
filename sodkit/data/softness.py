"""Whether a dataset's masks are binary or soft (alpha mattes), from a sample of them.

A salient-object mask is binary, often with anti-aliased edges: a pixel or two of in-between
values along the outline, well under 1 % of the pixels. An alpha matte (hair, fur, glass,
motion blur) holds whole regions of partial opacity. ``check-data`` reports which a dataset
is, and training says which targets it trains on: the masks' soft values (``data.binarize``
unset: they reach the losses as they are) or their binarisation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SOFT_SHARE = 0.01  # a dataset whose masks are on average >= 1 % in-between pixels is soft
LOW, HIGH = 13, 242  # in-between: alpha in (0.05, 0.95), as uint8 levels


@dataclass(frozen=True)
class Softness:
    """What a sample of masks holds: ``masks`` read, ``soft_masks`` of them with in-between
    pixels, and the mean share of in-between pixels per mask."""

    masks: int
    soft_masks: int
    share: float

    @property
    def kind(self) -> str:
        """``binary``, ``binary (anti-aliased edges)`` or ``soft (alpha mattes)``."""
        if self.soft_masks == 0:
            return "binary"
        return "soft (alpha mattes)" if self.share >= SOFT_SHARE else \
            "binary (anti-aliased edges)"

    @property
    def soft(self) -> bool:
        return self.share >= SOFT_SHARE

    def describe(self) -> str:
        """One line: the kind and its evidence."""
        return (f"{self.kind}: {100 * self.share:.2f}% of pixels in (0.05, 0.95) on average, "
                f"{self.soft_masks} of {self.masks} sampled masks hold some")


def in_between_share(mask: np.ndarray) -> float:
    """The share of a uint8 mask's pixels whose alpha is in (0.05, 0.95)."""
    counts = np.bincount(mask.ravel(), minlength=256)
    return float(counts[LOW:HIGH + 1].sum()) / max(mask.size, 1)


def softness(masks: Sequence[np.ndarray]) -> Softness:
    """The :class:`Softness` of some uint8 masks."""
    shares = [in_between_share(mask) for mask in masks]
    return Softness(len(shares), sum(share > 0 for share in shares),
                    float(np.mean(shares)) if shares else 0.0)


def sample_softness(paths: Sequence[Path], sample: int = 16) -> Softness:
    """The :class:`Softness` of ``sample`` masks spread evenly over ``paths`` (unreadable
    ones skipped: finding them is the checks' job)."""
    from ..errors import DataError
    from ..imageio import read_mask

    if len(paths) > sample:
        paths = [paths[i * (len(paths) - 1) // (sample - 1)] for i in range(sample)]
    masks = []
    for path in paths:
        try:
            masks.append(read_mask(path))
        except DataError:
            continue
    return softness(masks)
