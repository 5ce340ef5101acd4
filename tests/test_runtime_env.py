"""Where a process sits in a job (torchrun, SLURM, single); RNG states that load weights-only."""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest
import torch

from sodkit.config import ConfigError
from sodkit.engine.launcher import (
    SLURM_BASE_PORT,
    DistEnv,
    detect_dist_env,
    first_slurm_host,
    slurm_port,
)
from sodkit.engine.rng import rng_state, set_rng_state
from tests import processes
from tests.sod_fixtures import free_port


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


# ---------------------------------------------------------------------- GPU and backend choice
def test_the_gpu_comes_from_the_local_rank_not_the_global_rank():
    """Second node of a 2 x 4 job: global rank 6 is local rank 2 and takes GPU 2."""
    from sodkit.engine.devices import cuda_index

    env = detect_dist_env({"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2"})
    assert cuda_index(env.local_rank, visible=4) == 2
    slurm = detect_dist_env({"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
                             "SLURM_JOB_NODELIST": "gpu[01-02]"})
    assert cuda_index(slurm.local_rank, visible=4) == 1
    # one GPU bound per task (srun --gpus-per-task=1): it is device 0 whatever the local rank
    assert cuda_index(3, visible=1) == 0


def test_more_processes_than_gpus_on_a_node_is_a_clear_error():
    from sodkit.engine.devices import cuda_index

    with pytest.raises(ConfigError, match="local rank 4 has no GPU.*shows 4 GPUs"):
        cuda_index(4, visible=4)
    with pytest.raises(ConfigError, match="no GPU is visible"):
        cuda_index(0, visible=0)


def test_backend_choice():
    from sodkit.engine.devices import dist_backend

    assert dist_backend("auto", "cuda") == "nccl" and dist_backend("auto", "cpu") == "gloo"
    assert dist_backend("gloo", "cuda") == "gloo"  # two processes sharing one GPU
    with pytest.raises(ConfigError, match="nccl needs a CUDA device"):
        dist_backend("nccl", "cpu")


# one rank of a 2-process gloo job (plain processes, RANK / WORLD_SIZE / MASTER_*): the thread
# that ran a host-side collective, and whether it is still alive after Runtime.close()
_CLOSE = """
import os, threading, torch, torch.distributed as dist
from sodkit.config import RuntimeCfg
from sodkit.engine.runtime import Runtime
rt = Runtime(RuntimeCfg(num_threads=1))
model = rt.wrap(torch.nn.Linear(2, 2))  # DDP, as in a run: it keeps the default group alive
ran = []
work = dist.all_reduce(torch.ones(1), group=rt._host_group, async_op=True)
# the callback runs in the gloo thread that ran the collective
work.get_future().then(lambda _: ran.append(threading.get_native_id())).wait()
stop = rt.any_rank(False, True)
objects = rt.gather_to_main(rt.rank)
rt.close()
print(stop, objects, os.path.exists(f"/proc/self/task/{ran[0]}"))
"""


@pytest.mark.multiprocess
def test_close_joins_the_threads_of_the_host_side_collectives():
    """The gloo thread that ran ``any_rank`` (a run's last collective) lets go of its tensor
    after waking the caller; one still alive when the interpreter shuts down aborts the
    process, and torchrun fails the finished job (``Runtime.close``). So ``close`` leaves no
    thread of the host-side group alive, even with DistributedDataParallel holding the
    default group."""
    port = str(free_port())
    envs = [{**os.environ, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "OMP_NUM_THREADS": "1"}
            for rank in (0, 1)]
    done = processes.run_all([[sys.executable, "-c", _CLOSE]] * 2, env=envs)
    assert [proc.returncode for proc in done] == [0, 0], [proc.stderr[-2000:] for proc in done]
    assert done[0].stdout.split() == ["[False,", "True]", "[0,", "1]", "False"], done[0].stdout
    assert done[1].stdout.split() == ["[False,", "True]", "None", "False"], done[1].stdout
