"""Every stop is recoverable: preemption in mid-epoch, damaged checkpoints, diverged steps.

Real processes receive real signals; resumed runs are compared tensor by tensor with runs that
were never interrupted (CPU, ``runtime.deterministic=true``).
"""

from __future__ import annotations

import logging
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.engine.runtime import Runtime
from sodkit.errors import EXIT_PREEMPTED
from tests import processes
from tests.commands_entry import joined
from tests.sod_fixtures import free_port, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "demo.yaml")
pytestmark = pytest.mark.slow  # every test trains (and resumes) a run


def overrides(data_root: Path, out: Path, name: str, batch: int = 2) -> list[str]:
    """8 steps per epoch (16 pairs, batch 2), 2 epochs, no test set: seconds per run.

    timm's ``test_resnet`` (0.38M parameters, BatchNorm, a ResNet like resnet18's 11.2M): what
    these tests prove (signals, restarts, saves, resumes bit for bit) is the engine's, and
    with resnet18 the optimizer steps and 135 MB checkpoints were most of each run's CPU time
    (a 2-epoch batch-1 run: 12.6 s of CPU with resnet18, 5.9 s with test_resnet)."""
    return [f"data_root={data_root}", f"output_root={out}", f"name={name}",
            "data.train=[{preset: duts-tr}]", "data.test=[]", "data.size=48",
            f"data.batch_size={batch}", "data.num_workers=0", "model.backbone=test_resnet",
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
    proc = processes.start(cmd, cwd=ROOT, env=env(), text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    lines, sent = [], False
    for line in processes.lines(proc, seen=lines):
        if not sent and f" step {at_step}/" in line:
            for pid in (targets(proc) if targets else [proc.pid]):
                os.kill(pid, signal.SIGTERM)
            sent = True
    [code] = processes.wait(proc)
    return code, "".join(lines)


def sigterm_at_step(monkeypatch, step: int) -> None:
    """A real SIGTERM to this process during optimizer step ``step``: the run's own handler
    stops it after that step and saves it, as in a process the scheduler signals (which
    ``test_sigterm_in_mid_epoch_saves_that_step_and_resume_is_bitwise_equal`` does)."""
    original = Runtime.optimizer_step
    calls = []

    def optimizer_step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Runtime, "optimizer_step", optimizer_step)


def cut_in_process(monkeypatch, args: list[str], step: int) -> None:
    """Train ``args`` in this process until a SIGTERM during step ``step`` stops it."""
    with monkeypatch.context() as patch:
        sigterm_at_step(patch, step)
        assert main(["train", CONFIG, *args]) == EXIT_PREEMPTED


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


def run_jobs(*cmds: list[str]) -> list[subprocess.CompletedProcess]:
    """Run launchers side by side (one per node); a hang ends every one of their processes
    (torchrun's workers included) and fails the test (tests/processes.py)."""
    return processes.run_all(list(cmds), cwd=ROOT, env=env())


ELASTIC = ["data.test=[{preset: duts-te}]", "train.checkpoint_every_steps=2",
           "train.auto_resume=true"]


def torchrun(*options: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *options]


def one_node() -> list[list[str]]:
    return [torchrun("--standalone", "--nproc_per_node=2", "--max-restarts=1")]


def two_nodes() -> list[list[str]]:
    """Two agents of one process each: the agent whose worker survives restarts it without
    counting a restart, so the nodes' TORCHELASTIC_RESTART_COUNT differ afterwards."""
    port = free_port()
    return [torchrun("--nnodes=2", "--nproc_per_node=1", f"--node_rank={node}",
                     "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                     "--rdzv_id=sodkit-elastic", "--max-restarts=1") for node in (0, 1)]


def kill_entry(out: Path) -> list[str]:
    """``tests/elastic_kill_entry.py``: rank 1 SIGKILLs itself before step 5 of the last command
    (once per job: the file ``out/killed`` marks it)."""
    return [str(ROOT / "tests" / "elastic_kill_entry.py"), "1", "5", str(out / "killed")]


def hit_args(data: Path, out: Path) -> list[str]:
    """The run whose rank 1 is killed: ``out/hit``, the recipe of ``calm``."""
    return ["train", CONFIG, *overrides(data, out, "hit", batch=1), *ELASTIC]


@pytest.fixture(scope="module")
def sigterm_job(data, tmp_path_factory) -> dict:
    """A 2-process job SIGTERMed at step 3 (both workers, as a scheduler signals every task),
    then one launch (a launch's start costs more than these runs) with ``--max-restarts=1``
    that trains the undisturbed job ``calm``, resumes the cut one ``ddp_cut``, and trains
    ``hit`` until rank 1 is killed (``kill_entry``); the restarted attempt runs the three again
    (calm and ddp_cut are complete and say so) and hit resumes. What
    test_sigterm_under_torchrun_stops_every_rank_at_one_step checks, ``calm_elastic``, and the
    one-node case of test_a_killed_rank_restarts_and_the_job_finishes_as_if_undisturbed."""
    out = tmp_path_factory.mktemp("elastic")
    launcher = [*torchrun("--standalone", "--nproc_per_node=2"), "-m", "sodkit", "train", CONFIG]
    cut_args = [*overrides(data, out, "ddp_cut", batch=1), *ELASTIC]

    def workers(agent: subprocess.Popen) -> list[int]:
        children = Path(f"/proc/{agent.pid}/task/{agent.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    code, log = start_and_signal([*launcher, *cut_args], 3, targets=workers)
    saved = torch.load(out / "ddp_cut" / "checkpoints" / "last.pt", weights_only=True)
    [again] = run_jobs([*one_node()[0], *kill_entry(out),
                        *joined(["train", CONFIG, *overrides(data, out, "calm", batch=1),
                                 *ELASTIC],
                                ["train", CONFIG, *cut_args, "--resume", "auto"],
                                hit_args(data, out))])
    return {"code": code, "log": log, "saved": saved, "again": again, "out": out}


@pytest.fixture(scope="module")
def calm_elastic(sigterm_job) -> Path:
    """The undisturbed 2-process job the restarted ones are compared with."""
    assert sigterm_job["again"].returncode == 0, sigterm_job["again"].stderr[-3000:]
    return sigterm_job["out"] / "calm"


@pytest.mark.multiprocess
def test_sigterm_under_torchrun_stops_every_rank_at_one_step(sigterm_job, calm_elastic):
    """Both workers get SIGTERM (as a scheduler sends it to every task); they agree on the
    step, rank 0 saves it, each exits with EXIT_PREEMPTED; the resumed job equals the
    uninterrupted 2-process job (``calm_elastic``: the same recipe, never stopped)."""
    code, log, saved = sigterm_job["code"], sigterm_job["log"], sigterm_job["saved"]
    assert code != 0 and "exitcode" in log and f": {EXIT_PREEMPTED} " in log, log[-3000:]
    assert 0 < saved["epoch_step"] < 8 and len(saved["rng"]) == 2
    again = sigterm_job["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert_same_training_state(
        torch.load(calm_elastic / "checkpoints" / "last.pt", weights_only=True),
        torch.load(sigterm_job["out"] / "ddp_cut" / "checkpoints" / "last.pt",
                   weights_only=True))


@pytest.mark.multiprocess
@pytest.mark.parametrize("launch", ["one_node", "two_nodes"])
def test_a_killed_rank_restarts_and_the_job_finishes_as_if_undisturbed(data, tmp_path,
                                                                      sigterm_job, calm_elastic,
                                                                      launch):
    """--max-restarts=1: rank 1 is SIGKILLed in mid-epoch; the restarted job resumes from the
    newest step checkpoint by itself (train.auto_resume) and ends with the results and weights
    of an undisturbed run. The restarted rank 0 starts late, so the other rank meets the dead
    attempt's rendezvous entries first (they must not be taken for the new ones). One node:
    the last run of ``sigterm_job``'s second launch; two nodes: a launch of its own."""
    if launch == "one_node":
        out, done = sigterm_job["out"], [sigterm_job["again"]]
    else:
        out = tmp_path
        done = run_jobs(*[[*agent, *kill_entry(out), *hit_args(data, out)]
                          for agent in two_nodes()])
    marker = out / "killed"
    for job in done:
        assert job.returncode == 0, job.stderr[-3000:]
    output = "".join(job.stdout + job.stderr for job in done)
    # the first attempt really lost rank 1: it marks the file, then SIGKILLs itself; the agent
    # logs the failure it finds first, rank 1's SIGKILL or rank 0's error on the lost peer. That
    # error is gloo's, and its text depends on when the peer vanished ("Connection closed by
    # peer", or a read error on the TCP pair under load): sodkit's own line names rank 0 and
    # gloo's transport
    assert marker.exists() and "failed (exitcode: " in output
    failures = [line for line in output.splitlines()
                if "exitcode" in line or "error" in line.lower() or "peer" in line]
    lost_peer = [line for line in failures if line.startswith("rank 0 of 2 ")
                 and " failed: " in line and "gloo/transport" in line]
    assert "exitcode: -9" in output or "Connection closed by peer" in output or lost_peer, \
        failures
    assert f"no checkpoint in {out / 'hit' / 'checkpoints'} yet" in output  # started afresh
    log = (out / "hit" / "train.log").read_text()
    assert "resumed from" in log and "at epoch 1/2 step 4/16" in log
    assert (out / "hit" / "results.json").read_text() == \
        (calm_elastic / "results.json").read_text()
    assert_same_training_state(
        torch.load(calm_elastic / "checkpoints" / "last.pt", weights_only=True),
        torch.load(out / "hit" / "checkpoints" / "last.pt", weights_only=True))


def test_a_truncated_last_checkpoint_falls_back_to_the_previous_one(data, tmp_path, straight,
                                                                    caplog, monkeypatch):
    args = [*overrides(data, tmp_path, "trunc"), "train.checkpoint_every_steps=3"]
    cut_in_process(monkeypatch, args, 7)
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
    proc = processes.start([sys.executable, str(ROOT / "tests" / "slow_save_entry.py"), "6",
                            "train", CONFIG, *args], cwd=ROOT, env=env(), text=True,
                           stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    lines = []
    for line in processes.lines(proc, proc.stderr, seen=lines):
        if line.startswith("SLOW SAVE"):
            proc.send_signal(signal.SIGINT)
        elif line.startswith("SIGINT received"):  # the first one is handled: press again
            proc.send_signal(signal.SIGINT)
    assert processes.wait(proc) == [130], "".join(lines[-20:])
    folder = tmp_path / "ctrlc" / "checkpoints"
    assert lines[-1].startswith(f"sodkit train: interrupted while writing {folder}"
                                f"/step_00000006.pt: it was not written"), lines[-3:]
    assert "Traceback" not in "".join(lines)
    assert sorted(p.name for p in folder.iterdir()) == ["last.pt", "step_00000003.pt"]
    assert torch.load(folder / "last.pt", weights_only=True)["step"] == 3
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert_same_training_state(straight, torch.load(folder / "last.pt", weights_only=True))


def test_a_full_disk_stops_the_run_in_one_line_and_keeps_what_was_saved(data, tmp_path,
                                                                         straight, monkeypatch):
    """A resumed run whose next checkpoint does not fit (a file size limit below a checkpoint's
    size stands in for a full disk) stops with one line naming the file and the reason; the
    checkpoints written before are untouched, and once there is room the run finishes as if
    nothing had happened."""
    args = [*overrides(data, tmp_path, "full"), "train.checkpoint_every_steps=3"]
    cut_in_process(monkeypatch, args, 4)
    folder = tmp_path / "full" / "checkpoints"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    limit = (folder / "last.pt").stat().st_size // 2

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = processes.run([sys.executable, "-m", "sodkit", "train", CONFIG, *args, "--resume",
                          "auto"], cwd=ROOT, env=env(), preexec_fn=small_disk)
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
    proc = processes.start([sys.executable, "-m", "sodkit", "train", CONFIG, *args], cwd=ROOT,
                           env=env(), text=True, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    lines, victim = [], None
    for line in processes.lines(proc, seen=lines):
        if victim is None and " step 5/" in line:
            workers = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            victim = int(workers[0])
            os.kill(victim, signal.SIGKILL)
    assert processes.wait(proc) == [1], "".join(lines[-20:])
    # torch reports the death from its SIGCHLD handler (with the signal) or, when its loop
    # finds the worker gone first, as "exited unexpectedly" (no signal): both are one line
    assert re.match(rf"sodkit train: error: a data loading worker \(pid {victim}\) (was killed "
                    r"by a signal|exited unexpectedly)", lines[-1]), lines[-3:]
    assert "lower data.num_workers" in lines[-1] and "--resume auto" in lines[-1]
    assert "Traceback" not in "".join(lines)
    assert torch.load(tmp_path / "oom" / "checkpoints" / "last.pt", weights_only=True)["step"] >= 4
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    assert torch.load(tmp_path / "oom" / "checkpoints" / "last.pt", weights_only=True)["step"] == 16


def test_a_diverging_run_stops_naming_the_step_and_keeps_the_good_checkpoint(data, tmp_path,
                                                                             capsys, caplog):
    # epoch 1 trains normally and saves; at the epoch-2 milestone the LR grows 1e12 times
    args = [*overrides(data, tmp_path, "nan"), "optim.name=sgd", "optim.lr=0.01",
            "schedule.name=step", "schedule.milestones=[1]", "schedule.gamma=1e12"]
    with caplog.at_level(logging.INFO):
        code = main(["train", CONFIG, *args])
    said = capsys.readouterr().err + caplog.text  # the command's stderr: its line and its log
    assert code == 2, said[-3000:]
    error = [ln for ln in said.splitlines() if "error:" in ln]
    assert len(error) == 1 and "not finite" in error[0] and "step " in error[0]
    assert "untouched" in error[0] and "Traceback" not in said
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


def test_resume_in_mid_epoch_with_another_batch_is_refused(data, tmp_path, monkeypatch,
                                                           capsys):
    args = [*overrides(data, tmp_path, "mid"), "train.checkpoint_every_steps=3"]
    cut_in_process(monkeypatch, args, 4)  # a real SIGTERM in mid-epoch: a mid-epoch last.pt
    capsys.readouterr()
    code = main(["train", CONFIG, *args, "data.batch_size=4", "--resume", "auto"])
    err = capsys.readouterr().err
    assert code == 2 and "mid-epoch" in err and "data.batch_size 2 -> 4" in err


def test_tensorboard_has_no_duplicate_steps_after_a_resume(data, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = [*overrides(data, tmp_path, "tb")]
    cut_in_process(monkeypatch, args, 5)
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 0
    acc = EventAccumulator(str(tmp_path / "tb" / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [event.step for event in acc.Scalars("loss/loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 16


@pytest.mark.multiprocess
def test_sigterm_to_a_rank_blocked_in_a_collective_ends_it_after_the_grace(data, tmp_path):
    """Rank 1 is stopped (SIGSTOP: a hung peer), so rank 0 blocks in its next collective, where
    Python never runs its SIGTERM handler. The deadline thread ends rank 0 runtime.stop_grace_s
    after the signal, with one line and exit code 143, long before runtime.dist_timeout_s.

    Rank 0 is known to be blocked when it has used no CPU time for a second (measured, not a
    fixed sleep); its exit may take at most the grace plus the time it took to start and
    train 3 steps (a bound that grows with the machine's load, and is ~10 s when quiet)."""
    port = free_port()
    args = [*overrides(data, tmp_path, "blocked"), "train.epochs=500",
            "runtime.stop_grace_s=3", "runtime.dist_timeout_s=300"]
    started = time.monotonic()
    procs = [processes.start([sys.executable, "-m", "sodkit", "train", CONFIG, *args], cwd=ROOT,
                             env=env(SLURM_PROCID=str(rank), SLURM_NTASKS="2",
                                     SLURM_LOCALID=str(rank), SLURM_JOB_NODELIST="localhost",
                                     MASTER_PORT=str(port)),
                             text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for rank in (0, 1)]
    lines, sent, reached = [], None, None
    try:
        for line in processes.lines(procs[0], procs[0].stderr, seen=lines):
            if sent is None and " step 3/" in line:
                reached = time.monotonic() - started
                os.kill(procs[1].pid, signal.SIGSTOP)
                processes.until_idle(procs[0])  # rank 0 waits in its next collective
                sent = time.monotonic()
                os.kill(procs[0].pid, signal.SIGTERM)
        [code] = processes.wait(procs[0])
        elapsed = time.monotonic() - sent if sent else None
    finally:
        processes.kill(procs)
    rest = "".join(lines)
    assert sent is not None, rest[-3000:]
    assert code == 128 + signal.SIGTERM, rest[-3000:]
    assert 2.5 <= elapsed < 3 + reached, (elapsed, reached)
    assert "still running 3 s after the stop signal" in rest, rest[-3000:]
