"""Predictions of every rank in lockstep rounds: the one part of inference that knows about
ranks, shared by the trainer's evaluation (:mod:`sodkit.engine.evaluator`) and ``sodkit
predict`` (:mod:`sodkit.engine.predictor`).

Each rank predicts its own contiguous shard, one batch a round; every rank runs the same number
of rounds (a rank whose shard is done joins with an empty one), agrees once per round on a stop
and on non-finite predictions (:func:`agree_on_round`), and sends its encoded files to rank 0,
which writes them all (:class:`MaskWriter`). The forward and the encoding are
:mod:`sodkit.inference`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

from ..errors import Preempted, UserError
from ..outputs import OutputFolder
from .runtime import Runtime


class MaskWriter:
    """Rank 0 writes every rank's masks: each rank encodes its PNGs, and in lockstep rounds (one
    per batch of the longest shard, empty ones for shorter shards) rank 0 gathers and writes them.

    So a job on several machines needs no shared folder for predictions, and no file is written
    by two processes. One process: the masks are written at once. Each is written and recorded
    by ``outputs``, the output folder it goes to (it replaces only masks sodkit wrote there).
    """

    def __init__(self, runtime: Runtime, items: int, batch_size: int,
                 outputs: OutputFolder | None) -> None:
        self.runtime = runtime
        self.outputs = outputs  # None: nothing written (and no collective)
        longest_shard = math.ceil(items / runtime.world_size)
        self.rounds = math.ceil(longest_shard / batch_size)

    def send(self, files: list[tuple[Path, bytes]]) -> None:
        """This rank's files of one batch (every rank calls it once per round; an evaluation
        that writes nothing sends nothing and makes no collective)."""
        if self.outputs is None:
            return
        for part in self.runtime.gather_to_main(files) or []:
            for path, data in part:
                self.outputs.write_bytes(path, data)


def agree_on_round(runtime: Runtime, probs: torch.Tensor | None, names: Sequence[str],
                   precision: str = "fp32", stop: bool = False) -> None:
    """The one agreement every rank makes per round of predictions (a rank whose shard is done
    joins with ``probs`` None): a stop, and non-finite probabilities, seen on any rank.

    NaN probabilities quantise to 0: an all-black mask, written and measured as if it were a
    prediction; a batch holding any is an error instead, on every rank at once, so that none is
    left waiting in a gather.

    Raises:
        Preempted: ``stop`` on some rank (a stop signal during an evaluation).
        UserError: non-finite probabilities on some rank.
    """
    mine = probs is not None and not bool(torch.isfinite(probs).all())
    stopping, broken = runtime.any_rank(stop, mine)
    if stopping:
        raise Preempted("stopped during an evaluation")
    if broken:
        where = f"for {', '.join(names[:3])}" if mine else "on another process's images"
        hint = ("eval.precision fp16 overflowed: use fp32 or bf16" if precision == "fp16" else
                "the weights or data.mean / data.std are broken")
        raise UserError(f"the network predicted NaN or infinite values {where}; nothing of this "
                        f"batch is written ({hint})")
