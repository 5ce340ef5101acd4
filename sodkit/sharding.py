"""Which items a process takes of a list that several processes share: contiguous, uneven
shards, each item exactly once (no padding with duplicates, which made distributed evaluation
differ from one process). Plain arithmetic: datasets, the predictor and the folder evaluator use
it, and none of them needs to know how the processes were launched."""

from __future__ import annotations


def shard_range(length: int, rank: int, world_size: int) -> range:
    """The contiguous slice of ``range(length)`` that ``rank`` takes (sizes differ by <= 1)."""
    base, extra = divmod(length, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (1 if rank < extra else 0))
