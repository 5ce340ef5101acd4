"""The processes that share one ``sodkit eval``: one process, or a ``torchrun`` job.

Under torchrun each rank measures one contiguous shard of every dataset's images (sorted
stems; ``shard_range``: sizes differ by at most one, every image exactly once, each with its
dataset index), and rank 0 gathers every rank's ``SODMetrics`` state, merges them and computes
the numbers once, as ``sodkit test`` does: the merged records are the single-process records
in index order, so every metric, curve and per-image score is bit for bit the same. Rank 0 alone
writes files.

A failure one rank meets (an unreadable file, a folder that may not be written) must not leave
the others waiting in a collective: every step that may fail is followed by :meth:`settle`, where
all ranks learn the first failure and raise it, so the job ends with that one line (printed by
rank 0, written to each rank's torchrun error file).

One process needs no torch at all (``import torch`` costs seconds, ``sodkit eval`` none of it);
a job's collectives are the runtime's (gloo on the CPU: nothing here needs a GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.launcher import detect_dist_env
from ..errors import DataError, UserError
from ..sharding import shard_range

if TYPE_CHECKING:
    from ..engine.runtime import Runtime
    from ..metrics import SODMetrics


class Ranks:
    """This process's rank and shard, and the few collectives ``sodkit eval`` needs."""

    def __init__(self) -> None:
        env = detect_dist_env()
        self.rank, self.world_size = env.rank, env.world_size
        self.runtime: Runtime | None = None
        if self.world_size > 1:
            from ..config import RuntimeCfg
            from ..engine.runtime import Runtime

            self.runtime = Runtime(RuntimeCfg(device="cpu"))

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files and prints."""
        return self.rank == 0

    def shard(self, count: int) -> range:
        """The indices of ``count`` images this process measures."""
        return shard_range(count, self.rank, self.world_size)

    def settle(self, error: UserError | None) -> None:
        """Raise the first rank's failure on every rank (called by all ranks alike).

        Args:
            error: what this rank met, or None.
        """
        if self.runtime is None:
            if error is not None:
                raise error
            return
        mine = None if error is None else (isinstance(error, DataError), str(error))
        failures = self.runtime.gather_to_main(mine)
        first = next((f for f in failures if f is not None), None) if failures else None
        first = self.runtime.broadcast_object(first)
        if first is not None:
            is_data, message = first
            raise (DataError if is_data else UserError)(message)

    def merge(self, metrics: dict[str, SODMetrics]) -> tuple[dict[str, SODMetrics], list[int]]:
        """Every rank's metrics merged per method on rank 0, and how many images each rank
        measured (rank 0; other ranks get their own metrics and an empty list)."""
        if self.runtime is None:
            return metrics, [len(next(iter(metrics.values()), ()))]
        states = self.runtime.gather_to_main({name: m.state_dict() for name, m in metrics.items()})
        if states is None:
            return metrics, []
        return {name: _merged([state[name] for state in states]) for name in metrics}, [
            len(next(iter(state.values()))["index"]) if state else 0 for state in states]

    def close(self) -> None:
        """Leave the process group (a job's ranks end together)."""
        if self.runtime is not None:
            self.runtime.close()


def _merged(states: list[dict[str, Any]]) -> SODMetrics:
    from ..metrics import SODMetrics

    return SODMetrics.from_states(states)
