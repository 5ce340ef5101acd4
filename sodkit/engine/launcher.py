"""Where this process sits in a job, read from its launcher's environment, without torch.

``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, on one node or many), SLURM's ``srun``
without torchrun (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; the master is the first
host of the node list), or neither (a single process). :func:`detect_dist_env` is the only reader
of these variables. It lives apart from :mod:`sodkit.engine.runtime` so that commands which need
no torch in a single process (``sodkit eval``: ``import torch`` costs seconds) can ask whether
they run in a job before deciding to import it; the runtime re-exports every name here.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

logger = logging.getLogger(__name__)

SLURM_BASE_PORT = 15000  # srun without MASTER_PORT: 15000 + SLURM_JOB_ID % 10000 (as Lightning)


@dataclass(frozen=True)
class DistEnv:
    """This process's place in the job: global rank, world size, rank on its node, launcher."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    launcher: str = "none"  # "torchrun" (any env:// launcher), "slurm" or "none"
    master_addr: str | None = None  # set for "slurm"; torchrun's rendezvous provides its own
    master_port: int | None = None


def detect_dist_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Read the launcher's variables; torchrun's win over SLURM's (torchrun inside srun).

    Global rank and local rank are different things on several nodes: the device is picked by the
    local rank, files are written and the data is sharded by the global rank.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        found = DistEnv(int(env["RANK"]), int(env["WORLD_SIZE"]),
                        int(env.get("LOCAL_RANK", "0")), "torchrun")
    elif "SLURM_PROCID" in env and int(env.get("SLURM_NTASKS", "1") or 1) > 1:
        nodes = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        addr = env.get("MASTER_ADDR") or first_slurm_host(nodes)
        if not addr:
            raise _config_error("SLURM launch: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set")
        port = int(env.get("MASTER_PORT") or slurm_port(env.get("SLURM_JOB_ID", "0")))
        found = DistEnv(int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                        int(env.get("SLURM_LOCALID", "0")), "slurm", addr, port)
    else:
        return DistEnv()
    if not 0 <= found.rank < found.world_size:
        raise _config_error(f"{found.launcher}: rank {found.rank} is outside a world of "
                          f"{found.world_size} processes")
    return found


def _config_error(message: str) -> Exception:
    """A ConfigError, imported only when one is raised: the config package (YAML, the schema)
    is 0.05-0.15 s that a one-process ``sodkit eval`` never needs."""
    from ..errors import ConfigError

    return ConfigError(message)


def first_slurm_host(nodelist: str) -> str:
    """First host of a SLURM node list, as ``scontrol show hostnames`` would print it first.

    ``"gpu[07-09,12],cpu1"`` -> ``"gpu07"``, ``"rack[2-3]-n[01-04]"`` -> ``"rack2-n01"``; parsed
    here so that compute nodes without ``scontrol`` in the PATH work too.
    """
    depth = 0
    for i, char in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            nodelist = nodelist[:i]
            break
    match = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\](.*)", nodelist.strip())
    if match is None:
        return nodelist.strip()
    prefix, ranges, rest = match.groups()
    return prefix + ranges.split(",")[0].split("-")[0] + first_slurm_host(rest)


def slurm_port(job_id: str) -> int:
    """A port every task of a job derives alike, different for neighbouring jobs."""
    digits = re.sub(r"\D", "", job_id) or "0"
    return SLURM_BASE_PORT + int(digits) % 10000


def log_failure(exc: BaseException) -> None:
    """Name this process's rank in an error: the line users read first when a job dies."""
    env = detect_dist_env()
    if env.world_size > 1:
        logger.error("rank %d of %d (local rank %d on %s) failed: %s: %s", env.rank,
                     env.world_size, env.local_rank, socket.gethostname(),
                     type(exc).__name__, exc)
