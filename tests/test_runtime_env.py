"""Where a process sits in a job (torchrun, SLURM, single); RNG states that load weights-only."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sodkit.config import ConfigError
from sodkit.engine.runtime import (
    SLURM_BASE_PORT,
    DistEnv,
    detect_dist_env,
    first_slurm_host,
    rng_state,
    set_rng_state,
    slurm_port,
)


def test_no_launcher_is_a_single_process():
    assert detect_dist_env({}) == DistEnv()
    assert detect_dist_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}).world_size == 1


def test_torchrun_variables_give_global_and_local_rank():
    env = detect_dist_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"})
    assert (env.rank, env.world_size, env.local_rank, env.launcher) == (3, 4, 1, "torchrun")


def test_torchrun_inside_srun_wins_over_slurm():
    env = detect_dist_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0",
                           "SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
    assert (env.rank, env.launcher) == (1, "torchrun")


def test_srun_without_torchrun():
    env = detect_dist_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                           "SLURM_JOB_NODELIST": "gpu[07-10]", "SLURM_JOB_ID": "123456"})
    assert (env.rank, env.world_size, env.local_rank, env.launcher) == (5, 8, 1, "slurm")
    assert env.master_addr == "gpu07"
    assert env.master_port == SLURM_BASE_PORT + 3456


def test_srun_master_from_the_environment_first():
    env = detect_dist_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODELIST": "a,b",
                           "MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "29511"})
    assert (env.master_addr, env.master_port) == ("10.0.0.9", 29511)


def test_srun_without_node_list_is_a_clear_error():
    with pytest.raises(ConfigError, match="SLURM_JOB_NODELIST"):
        detect_dist_env({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})


def test_rank_outside_the_world_is_refused():
    with pytest.raises(ConfigError, match="rank 2"):
        detect_dist_env({"RANK": "2", "WORLD_SIZE": "2"})


@pytest.mark.parametrize(("nodelist", "first"), [
    ("node01", "node01"),
    ("node[01-03]", "node01"),
    ("node[7,9-12]", "node7"),
    ("gpu[007-010],cpu[1-2]", "gpu007"),
    ("a01,a02", "a01"),
    ("rack[2-3]-n[01-04]", "rack2-n01"),
    ("login-1.cluster", "login-1.cluster"),
])
def test_first_host_of_a_compact_node_list(nodelist, first):
    assert first_slurm_host(nodelist) == first


def test_slurm_port_is_a_function_of_the_job():
    assert slurm_port("4242") == slurm_port("4242") == SLURM_BASE_PORT + 4242
    assert slurm_port("4242") != slurm_port("4243")
    assert SLURM_BASE_PORT <= slurm_port("99999999") < SLURM_BASE_PORT + 10000


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    np.random.standard_normal()  # leaves a cached gaussian in numpy's state
    path = tmp_path / "rng.pt"
    torch.save({"rng": [rng_state(torch.device("cpu"))]}, path)
    expected = _draws()
    _draws()
    loaded = torch.load(path, weights_only=True)
    set_rng_state(loaded["rng"][0], torch.device("cpu"))
    assert _draws() == expected
