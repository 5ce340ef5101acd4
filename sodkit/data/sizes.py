"""Per-batch input sizes of multi-scale training: ``data.size_list`` (sizes drawn uniformly
from a list) or ``data.size_range`` (BiRefNet's ``dynamic_size``: a height and a width drawn
per batch from ranges, floored to a multiple of 32). Draws come from the sampler's generator,
which does not depend on the rank, so every rank uses the same size at the same step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config.schema import SIZE_MULTIPLE as MULTIPLE
from ..config.schema import DataCfg


@dataclass(frozen=True)
class SizeRange:
    """Heights in ``height`` and widths in ``width`` (inclusive), drawn as BiRefNet draws them:
    ``random.randint(low, high) // 32 * 32`` for each side, independently, once per batch."""

    height: tuple[int, int]
    width: tuple[int, int]

    def draw(self, rng: np.random.Generator, count: int) -> list[tuple[int, int]]:
        heights = rng.integers(self.height[0], self.height[1] + 1, count) // MULTIPLE * MULTIPLE
        widths = rng.integers(self.width[0], self.width[1] + 1, count) // MULTIPLE * MULTIPLE
        return [(int(h), int(w)) for h, w in zip(heights, widths, strict=True)]


Size = int | tuple[int, int]


def batch_size_choices(cfg: DataCfg) -> list[Size] | SizeRange:
    """``data.size_range`` when set, else ``data.size_list`` (pairs as tuples), else
    ``[data.size]`` (one size: no multi-scale)."""
    if cfg.size_range:
        (h0, h1), (w0, w1) = cfg.size_range
        return SizeRange((h0, h1), (w0, w1))
    sizes: list[Size] = [tuple(s) if isinstance(s, list) else s for s in cfg.size_list]
    return sizes or [cfg.size]
