"""Every stop is recoverable: preemption in mid-epoch, damaged checkpoints, diverged steps.

Real processes receive real signals; resumed runs are compared tensor by tensor with runs that
were never interrupted (CPU, ``runtime.deterministic=true``).
"""

from __future__ import annotations

import contextlib
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.errors import EXIT_PREEMPTED
from tests.sod_fixtures import free_port, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "demo.yaml")


def overrides(data_root: Path, out: Path, name: str, batch: int = 2) -> list[str]:
    """8 steps per epoch (16 pairs, batch 2), 2 epochs, no test set: seconds per run."""
    return [f"data_root={data_root}", f"output_root={out}", f"name={name}",
            "data.train=[{preset: duts-tr}]", "data.test=[]", "data.size=48",
            f"data.batch_size={batch}", "data.num_workers=0", "model.backbone=resnet18",
            "model.decoder_channels=8", "train.epochs=2", "train.log_every=1",
            "train.image_every=0", "runtime.deterministic=true", "runtime.num_threads=1",
            "data.size_list=[48,64]"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_duts_layout(tmp_path_factory.mktemp("ft"), n_train=16, n_test=2)


@pytest.fixture(scope="module")
def straight(data, tmp_path_factory) -> dict:
    """The uninterrupted run every interrupted one is compared with."""
    out = tmp_path_factory.mktemp("straight")
    assert main(["train", CONFIG, *overrides(data, out, "ref")]) == 0
    return torch.load(out / "ref" / "checkpoints" / "last.pt", weights_only=True)


def assert_same_training_state(a: dict, b: dict) -> None:
    assert (a["epoch"], a["step"]) == (b["epoch"], b["step"])
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    for index, state in a["optimizer"]["state"].items():
        for name, value in state.items():
            other = b["optimizer"]["state"][index][name]
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(other)), (index, name)


def env(**extra: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_", "SLURM_"))}
    return {**keep, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **extra}


def start_and_signal(cmd: list[str], at_step: int, targets=None) -> tuple[int, str]:
    """Run ``cmd``; once a log line reports ``step at_step/``, SIGTERM it (or the processes
    ``targets(proc)`` names)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    lines, sent = [], False
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        lines.append(line)
        if not sent and f" step {at_step}/" in line:
            for pid in (targets(proc) if targets else [proc.pid]):
                os.kill(pid, signal.SIGTERM)
            sent = True
        assert time.monotonic() < deadline, "".join(lines[-30:])
    return proc.wait(timeout=120), "".join(lines)


def test_sigterm_in_mid_epoch_saves_that_step_and_resume_is_bitwise_equal(data, tmp_path,
                                                                           straight):
    at = random.Random().randint(2, 6)  # any step of the first epoch (8 steps)
    args = [sys.executable, "-m", "sodkit", "train", CONFIG, *overrides(data, tmp_path, "cut")]
    code, log = start_and_signal(args, at)
    assert code == EXIT_PREEMPTED, log[-3000:]
    assert "SIGTERM received" in log and "--resume auto" in log
    saved = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)
    assert saved["epoch"] == 0 and 0 < saved["epoch_step"] == saved["step"] < 8, (at, saved)
    assert main(["train", CONFIG, *overrides(data, tmp_path, "cut"), "--resume", "auto"]) == 0
    resumed = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)
    assert_same_training_state(straight, resumed)


@pytest.mark.slow
def test_sigterm_under_torchrun_stops_every_rank_at_one_step(data, tmp_path):
    """Both workers get SIGTERM (as a scheduler sends it to every task); they agree on the
    step, rank 0 saves it, each exits with EXIT_PREEMPTED; the resumed job equals the
    uninterrupted 2-process job."""
    common = overrides(data, tmp_path, "ddp_ref", batch=1)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node=2", "-m", "sodkit", "train", CONFIG]
    ref = subprocess.run([*launcher, *common], cwd=ROOT, env=env(), capture_output=True,
                         text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    cut_args = overrides(data, tmp_path, "ddp_cut", batch=1)

    def workers(agent: subprocess.Popen) -> list[int]:
        children = Path(f"/proc/{agent.pid}/task/{agent.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    code, log = start_and_signal([*launcher, *cut_args], 3, targets=workers)
    assert code != 0 and "exitcode" in log and f": {EXIT_PREEMPTED} " in log, log[-3000:]
    saved = torch.load(tmp_path / "ddp_cut" / "checkpoints" / "last.pt", weights_only=True)
    assert 0 < saved["epoch_step"] < 8 and len(saved["rng"]) == 2
    again = subprocess.run([*launcher, *cut_args, "--resume", "auto"], cwd=ROOT, env=env(),
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_training_state(
        torch.load(tmp_path / "ddp_ref" / "checkpoints" / "last.pt", weights_only=True),
        torch.load(tmp_path / "ddp_cut" / "checkpoints" / "last.pt", weights_only=True))


def run_jobs(*cmds: list[str], timeout: float = 240) -> list[subprocess.CompletedProcess]:
    """Run launchers side by side (one per node), each in its own process group with its output
    in files; past ``timeout`` every group is killed (torchrun's workers included), so that a
    hang fails the test instead of outliving it."""
    files = [(tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")) for _ in cmds]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env=env(), text=True, start_new_session=True,
                              stdout=out, stderr=err)
             for cmd, (out, err) in zip(cmds, files, strict=True)]
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        pytest.fail(f"{len(procs)} launcher(s) ran over {timeout} s:\n" + read(files[0][1]))
    return [subprocess.CompletedProcess(proc.args, proc.returncode, read(out), read(err))
            for proc, (out, err) in zip(procs, files, strict=True)]


def read(stream) -> str:
    stream.seek(0)
    text = stream.read()
    stream.close()
    return text


ELASTIC = ["data.test=[{preset: duts-te}]", "train.checkpoint_every_steps=2",
           "train.auto_resume=true"]


def torchrun(*options: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *options]


@pytest.fixture(scope="module")
def calm_elastic(data, tmp_path_factory) -> Path:
    """The undisturbed 2-process job the restarted ones are compared with."""
    out = tmp_path_factory.mktemp("calm")
    [calm] = run_jobs([*torchrun("--standalone", "--nproc_per_node=2", "--max-restarts=1"),
                       "-m", "sodkit", "train", CONFIG, *overrides(data, out, "calm", batch=1),
                       *ELASTIC])
    assert calm.returncode == 0, calm.stderr[-3000:]
    return out / "calm"


def one_node() -> list[list[str]]:
    return [torchrun("--standalone", "--nproc_per_node=2", "--max-restarts=1")]


def two_nodes() -> list[list[str]]:
    """Two agents of one process each: the agent whose worker survives restarts it without
    counting a restart, so the nodes' TORCHELASTIC_RESTART_COUNT differ afterwards."""
    port = free_port()
    return [torchrun("--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}",
                     "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                     "--rdzv_id=sodkit-elastic", "--max-restarts=1") for node in (0, 1)]


@pytest.mark.slow
@pytest.mark.parametrize("launch", [one_node, two_nodes])
def test_a_killed_rank_restarts_and_the_job_finishes_as_if_undisturbed(data, tmp_path,
                                                                      calm_elastic, launch):
    """--max-restarts=1: rank 1 is SIGKILLed in mid-epoch; the restarted job resumes from the
    newest step checkpoint by itself (train.auto_resume) and ends with the results and weights
    of an undisturbed run. The restarted rank 0 starts late, so the other rank meets the dead
    attempt's rendezvous entries first (they must not be taken for the new ones)."""
    marker = tmp_path / "killed"
    entry = [str(ROOT / "tests" / "elastic_kill_entry.py"), "1", "5", str(marker), "train",
             CONFIG, *overrides(data, tmp_path, "hit", batch=1), *ELASTIC]
    done = run_jobs(*[[*agent, *entry] for agent in launch()])
    for job in done:
        assert job.returncode == 0, job.stderr[-3000:]
    output = "".join(job.stdout + job.stderr for job in done)
    assert marker.exists() and "exitcode: -9" in output  # the first attempt really lost rank 1
    assert "no checkpoint" in output  # the first attempt started afresh
    log = (tmp_path / "hit" / "train.log").read_text()
    assert "resumed from" in log and "at epoch 0, step 4" in log
    assert (tmp_path / "hit" / "results.json").read_text() == \
        (calm_elastic / "results.json").read_text()
    assert_same_training_state(
        torch.load(calm_elastic / "checkpoints" / "last.pt", weights_only=True),
        torch.load(tmp_path / "hit" / "checkpoints" / "last.pt", weights_only=True))


def test_a_truncated_last_checkpoint_falls_back_to_the_previous_one(data, tmp_path, straight,
                                                                    caplog):
    args = [*overrides(data, tmp_path, "trunc"), "train.checkpoint_every_steps=3"]
    code, _ = start_and_signal([sys.executable, "-m", "sodkit", "train", CONFIG, *args], 7)
    assert code == EXIT_PREEMPTED
    folder = tmp_path / "trunc" / "checkpoints"
    kept = sorted(p.name for p in folder.glob("step_*.pt"))
    assert len(kept) == 2 and kept[0] == "step_00000006.pt", kept  # keep_checkpoints=2
    last = folder / "last.pt"
    data_bytes = last.read_bytes()
    last.write_bytes(data_bytes[: len(data_bytes) // 3])  # a save cut short by a full disk
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert "skipping" in caplog.text and "step_00000006.pt (step 6)" in caplog.text
    resumed = torch.load(last, weights_only=True)
    assert_same_training_state(straight, resumed)


def test_ctrl_c_during_a_save_says_so_in_one_line_and_loses_nothing(data, tmp_path, straight):
    """The first Ctrl-C asks to stop after the step; a second one, pressed while the step-6
    checkpoint is being written, stops at once: one line, no temporary file left, the step-3
    checkpoint still whole and the run still resumable to the uninterrupted result."""
    args = [*overrides(data, tmp_path, "ctrlc"), "train.checkpoint_every_steps=3"]
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "slow_save_entry.py"), "6",
                             "train", CONFIG, *args], cwd=ROOT, env=env(), text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("SLOW SAVE"):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            break
    lines.extend(proc.stderr)
    assert proc.wait(timeout=60) == 130, "".join(lines[-20:])
    folder = tmp_path / "ctrlc" / "checkpoints"
    assert lines[-1].startswith(f"sodkit train: interrupted while writing {folder}"
                                f"/step_00000006.pt: it was not written"), lines[-3:]
    assert "Traceback" not in "".join(lines)
    assert sorted(p.name for p in folder.iterdir()) == ["last.pt", "step_00000003.pt"]
    assert torch.load(folder / "last.pt", weights_only=True)["step"] == 3
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert_same_training_state(straight, torch.load(folder / "last.pt", weights_only=True))


def test_a_full_disk_stops_the_run_in_one_line_and_keeps_what_was_saved(data, tmp_path,
                                                                         straight):
    """A resumed run whose next checkpoint does not fit (a file size limit below a checkpoint's
    size stands in for a full disk) stops with one line naming the file and the reason; the
    checkpoints written before are untouched, and once there is room the run finishes as if
    nothing had happened."""
    args = [*overrides(data, tmp_path, "full"), "train.checkpoint_every_steps=3"]
    code, _ = start_and_signal([sys.executable, "-m", "sodkit", "train", CONFIG, *args], 4)
    assert code == EXIT_PREEMPTED
    folder = tmp_path / "full" / "checkpoints"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    limit = (folder / "last.pt").stat().st_size // 2

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "sodkit", "train", CONFIG, *args, "--resume",
                           "auto"], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=300, preexec_fn=small_disk)
    assert proc.returncode == 2, proc.stderr[-3000:]
    error = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(error) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"could not write {folder}/step_00000006.pt: File too large" in error[0]
    assert "it was not written; files saved before are intact" in error[0]
    assert "--resume auto" in error[0]
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert_same_training_state(straight, torch.load(folder / "last.pt", weights_only=True))


def test_a_killed_loader_worker_ends_in_one_line_and_the_run_resumes(data, tmp_path):
    """The out-of-memory killer takes a DataLoader worker (SIGKILL): torch reports it from its
    SIGCHLD handler wherever the main process is, as a traceback through the network; sodkit
    says what happened and what to change in one line, and the step checkpoint is there."""
    args = [*overrides(data, tmp_path, "oom"), "data.num_workers=2",
            "train.checkpoint_every_steps=2"]
    proc = subprocess.Popen([sys.executable, "-m", "sodkit", "train", CONFIG, *args], cwd=ROOT,
                            env=env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    lines, victim = [], None
    for line in proc.stdout:
        lines.append(line)
        if victim is None and " step 5/" in line:
            workers = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            victim = int(workers[0])
            os.kill(victim, signal.SIGKILL)
    assert proc.wait(timeout=120) == 1, "".join(lines[-20:])
    assert lines[-1].startswith(f"sodkit train: error: a data loading worker (pid {victim}) "
                                "was killed"), lines[-3:]
    assert "lower data.num_workers" in lines[-1] and "--resume auto" in lines[-1]
    assert "Traceback" not in "".join(lines)
    assert torch.load(tmp_path / "oom" / "checkpoints" / "last.pt", weights_only=True)["step"] >= 4
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert torch.load(tmp_path / "oom" / "checkpoints" / "last.pt", weights_only=True)["step"] == 16


def test_a_diverging_run_stops_naming_the_step_and_keeps_the_good_checkpoint(data, tmp_path):
    # epoch 1 trains normally and saves; at the epoch-2 milestone the LR grows 1e12 times
    args = [*overrides(data, tmp_path, "nan"), "optim.name=sgd", "optim.lr=0.01",
            "schedule.name=step", "schedule.milestones=[1]", "schedule.gamma=1e12"]
    proc = subprocess.run([sys.executable, "-m", "sodkit", "train", CONFIG, *args], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    error = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(error) == 1 and "not finite" in error[0] and "step " in error[0]
    assert "untouched" in error[0] and "Traceback" not in proc.stderr
    kept = torch.load(tmp_path / "nan" / "checkpoints" / "last.pt", weights_only=True)
    assert (kept["epoch"], kept["step"]) == (1, 8)
    assert all(torch.isfinite(v).all() for v in kept["model"].values() if v.is_floating_point())


def test_bad_steps_within_the_limit_are_skipped(data, tmp_path):
    args = [*overrides(data, tmp_path, "skip"), "optim.name=sgd", "optim.lr=0.01",
            "schedule.name=step", "schedule.milestones=[1]", "schedule.gamma=1e12",
            "train.max_bad_steps=100", "train.epochs=2"]
    assert main(["train", CONFIG, *args]) == 0
    state = torch.load(tmp_path / "skip" / "checkpoints" / "last.pt", weights_only=True)
    assert state["bad_steps"] >= 1 and state["step"] == 16
    weights = {k: v for k, v in state["model"].items() if "running_" not in k
               and v.is_floating_point()}  # (huge finite steps may overflow BN statistics)
    assert all(torch.isfinite(v).all() for v in weights.values())  # NaN never applied


def test_resume_in_mid_epoch_with_another_batch_is_refused(data, tmp_path):
    args = [*overrides(data, tmp_path, "mid"), "train.checkpoint_every_steps=3"]
    code, _ = start_and_signal([sys.executable, "-m", "sodkit", "train", CONFIG, *args], 4)
    assert code == EXIT_PREEMPTED  # a real SIGTERM in mid-epoch: a mid-epoch last.pt
    bigger = [*args, "data.batch_size=4", "--resume", "auto"]
    proc = subprocess.run([sys.executable, "-m", "sodkit", "train", CONFIG, *bigger], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "mid-epoch" in proc.stderr and "data.batch_size 2 -> 4" in \
        proc.stderr


def test_tensorboard_has_no_duplicate_steps_after_a_resume(data, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = overrides(data, tmp_path, "tb")
    code, _ = start_and_signal([sys.executable, "-m", "sodkit", "train", CONFIG, *args], 5)
    assert code == EXIT_PREEMPTED
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    acc = EventAccumulator(str(tmp_path / "tb" / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [event.step for event in acc.Scalars("loss/loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 16



def test_sigterm_to_a_rank_blocked_in_a_collective_ends_it_after_the_grace(data, tmp_path):
    """Rank 1 is stopped (SIGSTOP: a hung peer), so rank 0 blocks in its next collective, where
    Python never runs its SIGTERM handler. The deadline thread ends rank 0 runtime.stop_grace_s
    after the signal, with one line and exit code 143, long before runtime.dist_timeout_s."""
    port = free_port()
    args = [*overrides(data, tmp_path, "blocked"), "train.epochs=500",
            "runtime.stop_grace_s=3", "runtime.dist_timeout_s=300"]
    procs = []
    for rank in (0, 1):
        rank_env = env(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank),
                       SLURM_JOB_NODELIST="localhost", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-m", "sodkit", "train", CONFIG, *args],
                                      cwd=ROOT, env=rank_env, text=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    try:
        lines = []
        for line in procs[0].stderr:
            lines.append(line)
            if " step 3/" in line:
                break
        assert procs[0].poll() is None, "".join(lines[-20:])
        os.kill(procs[1].pid, signal.SIGSTOP)
        time.sleep(1.0)  # rank 0 reaches its next collective and waits there
        sent = time.monotonic()
        os.kill(procs[0].pid, signal.SIGTERM)
        code = procs[0].wait(timeout=60)
        elapsed = time.monotonic() - sent
        rest = procs[0].stderr.read()
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 128 + signal.SIGTERM, rest[-3000:]
    assert 2.5 <= elapsed < 30, elapsed
    assert "still running 3 s after the stop signal" in rest, rest[-3000:]
