"""A key space of its own for each torchelastic attempt, so restarted workers never meet the dead.

torchrun (torch 2.5 and later, c10d rendezvous) hosts one TCPStore in its agent for the whole job
and hands it to the workers of every attempt (``TORCHELASTIC_USE_AGENT_STORE=True``). The store
outlives a failed attempt, so after ``--max-restarts`` brings the workers back, the entries that
``init_process_group`` wrote in the dead attempt (each rank's gloo address, the NCCL unique id)
are still there: a rank that starts before its peer reads the peer's old address and fails
(``Gloo connectFullMesh failed ... Connection refused``) or waits out the timeout
(pytorch/pytorch#135712). ``TORCHELASTIC_RESTART_COUNT`` cannot name the attempt: each node's
agent counts its own restarts, and nodes that restart because a peer failed do not count it.

So rank 0 draws a random token in every attempt and hands it to each other rank through a
handshake in which both sides bring a fresh random value: rank r posts a nonce, rank 0 answers it
with the token, rank r acknowledges with the token. An entry left by an earlier attempt can never
complete it. The process group then lives under ``sodkit/<token>/`` in the agent's store.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from datetime import timedelta

import torch.distributed as dist

POLL_S = 0.02


def uses_agent_store(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchrun gave this worker its agent's long-lived store (``MASTER_ADDR:PORT``)."""
    env = os.environ if environ is None else environ
    return (env.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and bool(env.get("MASTER_ADDR"))
            and bool(env.get("MASTER_PORT")))


def agent_store(timeout: timedelta, environ: Mapping[str, str] | None = None) -> dist.Store:
    """A client of the store the torchelastic agent hosts at ``MASTER_ADDR:MASTER_PORT``."""
    env = os.environ if environ is None else environ
    return dist.TCPStore(env["MASTER_ADDR"], int(env["MASTER_PORT"]), is_master=False,
                         timeout=timeout)


def attempt_token(store: dist.Store, rank: int, world_size: int, timeout: timedelta) -> str:
    """The token every rank of this attempt agrees on (drawn by rank 0), never an older one's.

    Raises:
        TimeoutError: a rank did not take part within ``timeout`` (it names the ranks missing).
    """
    deadline = time.monotonic() + timeout.total_seconds()
    if rank == 0:
        return _hand_out(store, world_size, deadline)
    return _receive(store, rank, deadline)


def attempt_store(store: dist.Store, token: str) -> dist.Store:
    return dist.PrefixStore(f"sodkit/{token}/", store)


def _hand_out(store: dist.Store, world_size: int, deadline: float) -> str:
    token = uuid.uuid4().hex
    pending = set(range(1, world_size))
    answered: dict[int, bytes] = {}  # rank -> the nonce we last answered
    while pending:
        for rank in sorted(pending):
            if store.check([f"sodkit/ack/{rank}"]) and \
                    store.get(f"sodkit/ack/{rank}").decode() == token:
                pending.discard(rank)
            elif store.check([f"sodkit/hello/{rank}"]):
                nonce = store.get(f"sodkit/hello/{rank}")
                if answered.get(rank) != nonce:  # maybe an old attempt's: answering costs nothing
                    store.set(f"sodkit/token/{rank}", nonce + b":" + token.encode())
                    answered[rank] = nonce
        if pending:
            _wait(deadline, f"ranks {sorted(pending)} did not join this attempt")
    return token


def _receive(store: dist.Store, rank: int, deadline: float) -> str:
    nonce = uuid.uuid4().hex.encode()
    store.set(f"sodkit/hello/{rank}", nonce)
    while True:
        if store.check([f"sodkit/token/{rank}"]):
            mine, _, token = store.get(f"sodkit/token/{rank}").partition(b":")
            if mine == nonce:
                store.set(f"sodkit/ack/{rank}", token)
                return token.decode()
        _wait(deadline, f"rank {rank}: rank 0 did not answer in this attempt")


def _wait(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise TimeoutError(f"rendezvous: {what} (runtime.dist_timeout_s)")
    time.sleep(POLL_S)
