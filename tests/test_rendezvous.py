"""Each torchelastic attempt meets in a key space of its own (sodkit.engine.rendezvous).

torchrun's agent keeps one store for the whole job; entries written by a dead attempt must never
be taken for the current one's. A real TCPStore server plays the agent; each rank is a thread
with its own client connection, as each worker process has.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from sodkit.engine import rendezvous

TIMEOUT = timedelta(seconds=20)


@pytest.fixture()
def server():
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=TIMEOUT)
    yield store


def attempt(server, world_size: int, late: dict[int, float] | None = None) -> dict[int, str]:
    """Every rank runs the handshake on its own client; ``late`` ranks start that many s late."""
    tokens: dict[int, str] = {}
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            time.sleep((late or {}).get(rank, 0.0))
            client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=TIMEOUT)
            tokens[rank] = rendezvous.attempt_token(client, rank, world_size, TIMEOUT)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    return tokens


def test_all_ranks_agree_on_one_token_per_attempt(server):
    first = attempt(server, 4)
    assert len(first) == 4 and len(set(first.values())) == 1


def test_a_restarted_attempt_never_takes_the_dead_attempts_entries(server):
    """Later attempts run over the earlier ones' hello/token/ack entries: a slow rank 0 (the
    others find the old answers waiting), then slow other ranks (rank 0 finds their old nonces
    and acknowledgements waiting)."""
    seen: set[str] = set()
    for late in ({}, {0: 0.5}, {1: 0.5, 2: 1.0}):
        tokens = set(attempt(server, 3, late).values())
        assert len(tokens) == 1 and not tokens & seen, late
        seen |= tokens


def test_the_process_group_keys_of_two_attempts_do_not_meet(server):
    first = rendezvous.attempt_store(server, "a" * 32)
    second = rendezvous.attempt_store(server, "b" * 32)
    first.set("rank_1", b"127.0.0.1:1111")
    assert not second.check(["rank_1"])


def test_a_rank_that_never_comes_is_named_after_the_timeout(server):
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=TIMEOUT)
    with pytest.raises(TimeoutError, match=r"ranks \[1, 2\] did not join"):
        rendezvous.attempt_token(client, 0, 3, timedelta(seconds=0.3))


def test_only_the_agents_store_takes_the_handshake():
    env = {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "h", "MASTER_PORT": "1"}
    assert rendezvous.uses_agent_store(env)
    assert not rendezvous.uses_agent_store({**env, "TORCHELASTIC_USE_AGENT_STORE": "False"})
    assert not rendezvous.uses_agent_store({"MASTER_ADDR": "h", "MASTER_PORT": "1"})
