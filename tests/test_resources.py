"""Default loader workers and compute threads from the core count."""

from __future__ import annotations

from sodkit.config import load_config
from sodkit.resources import available_cores, default_threads, default_workers, resolve_workers


def test_workers_and_threads_share_the_cores() -> None:
    assert [default_workers(c) for c in (1, 2, 3, 4, 8, 32)] == [0, 0, 1, 2, 4, 8]
    for cores in (1, 2, 4, 8, 32):
        assert default_threads(cores) == max(1, cores - default_workers(cores))
    assert resolve_workers(3) == 3 and resolve_workers(None) == default_workers()


def test_local_ranks_split_the_cores(monkeypatch) -> None:
    alone = available_cores()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert available_cores() == max(1, alone // 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3


def test_config_defaults_are_automatic() -> None:
    cfg = load_config(None, [])
    assert cfg.data.num_workers is None and cfg.runtime.num_threads is None
    assert cfg.data.prefetch_factor == 2 and not cfg.runtime.channels_last
