"""Distributed training with real processes (gloo on CPU): torchrun on one and two "nodes", SLURM
without torchrun, equivalence with one process, exact resume, failures, the run folder.

One 2-process torchrun run (module fixture ``ddp_run``: SyncBatchNorm, multi-scale, 2 epochs of
2 steps, no test sets) is the reference the other launches are compared with. It shares its
torchrun launch with the published networks' 2-process runs (``tests/commands_entry.py``): a
launch's start costs more than these runs.

No run here has a collective timeout of its own: a job that waits for a lost peer uses no CPU
time, and ``tests/processes.py`` ends it after a minute of that, where a fixed timeout (it was
60 s) also ended the slow but healthy ones of a busy machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import RuntimeCfg
from tests import processes
from tests.commands_entry import joined
from tests.sod_fixtures import free_port, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "demo.yaml")
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_ERROR_FILE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
               "SLURM_JOB_NODELIST", "SLURM_NODELIST", "SLURM_JOB_ID")

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]
DIST_TIMEOUT_S = RuntimeCfg().dist_timeout_s  # what a rank waits for a lost peer: 600 s


# Every run here trains timm's test_resnet (0.38M parameters, BatchNorm, residual blocks) instead
# of resnet18 (11.2M): these properties are the engine's, and in float64 (which has no fast CPU
# convolution) a resnet18 run of 1 x batch 8 took 7.5 s of CPU against 0.8 s. The comparisons keep
# their strength with it (measured, 2 x 4 against 1 x 8, float64: 2.2e-15 after epoch 1, 8.9e-15
# after epoch 2; with per-rank BatchNorm statistics 0.18 and 0.31).
SMALL = "test_resnet"


def overrides(data_root: Path, out: Path, name: str, batch: int = 4,
              backbone: str = SMALL) -> list[str]:
    """The training recipe every launch here shares (tiny: 16 images, 64-96 px, 4 steps).

    SGD, not the demo's AdamW: Adam divides each gradient by its running RMS, so an entry whose
    gradient is round-off sized (RMS ~2e-8 here) moves by a fraction of lr in a direction that
    round-off picks, and two mathematically equal runs drift apart by up to 1.8e-3 on such
    entries after 4 steps (measured; docs/distributed.md).
    """
    return [
        f"data_root={data_root}", f"output_root={out}", f"name={name}",
        "data.train=[{preset: duts-tr}]", "data.test=[]", "data.size=64",
        "data.size_list=[64,96]", f"data.batch_size={batch}", "data.num_workers=0",
        f"model.backbone={backbone}", "model.decoder_channels=16", "train.epochs=2",
        "train.keep_every=1", "train.log_every=1", "train.image_every=0",
        "runtime.sync_bn=true", "runtime.deterministic=true", "optim.name=sgd", "optim.lr=0.05",
        "runtime.precision=fp64",
    ]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def torchrun(*args: str, nproc: int = 2, launcher: list[str] | None = None
             ) -> subprocess.CompletedProcess:
    launcher = launcher or ["--standalone", f"--nproc_per_node={nproc}"]
    return processes.run([sys.executable, "-m", "torch.distributed.run", *launcher, *args],
                         cwd=ROOT, env=clean_env())


def last(run: Path, name: str = "last.pt") -> dict:
    """A checkpoint, read the way weights-only loading reads it (tensors and plain types)."""
    return torch.load(run / "checkpoints" / name, map_location="cpu", weights_only=True)


# The bound of every "2 processes == 1 process" comparison here: the runs are float64
# (runtime.precision fp64), whose unit round-off (2**-53) is 2**29 ~ 5e8 times float32's.
# In float32 these equal runs drift apart chaotically (timm starts each residual block's last
# BatchNorm scale at 0, and the gradients of such scales are sums whose terms cancel): after 4
# steps 2.8e-4 on one AVX-512 CPU and 2.0e-5 on AVX2, after 2 steps 8.9e-6 on an AMD EPYC
# with AVX-512-BF16 (which failed a 1e-6 bound measured on another machine; these were resnet18,
# test_resnet's float32 runs drift 7.7e-6 in 4 steps). The same growth from float64's round-off
# stays under 1e-12 (measured: 5e-15 after 4 steps with resnet18, the same with AVX2 kernels;
# 8.9e-15 with test_resnet), so 1e-10 holds on any IEEE machine with a margin of 100 over that,
# and stays 1e9 below the faults the tests are for (per-rank BatchNorm statistics: 0.18 after
# 2 steps).
FP64_ATOL = 1e-10


def assert_same_model(a: dict, b: dict, atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for key, value in a.items():
        if atol == 0.0 or not value.is_floating_point():
            assert torch.equal(value, b[key]), key
        else:
            torch.testing.assert_close(value, b[key], rtol=0, atol=atol, msg=key)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return write_duts_layout(tmp_path_factory.mktemp("sod"), n_train=16, n_test=7)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


# the published recipes (their networks, losses, optimizers, schedules); CEL and BiRefNet's IoU
# per image here: their released batch pooling / sum runs over each process's own batch, so
# 2 x 4 is not 1 x 8 for them
PUBLISHED = {
    "minet": ("duts_minet_r50.yaml", ["loss.terms={bce: 1.0, cel: {weight: 1.0, reduction: "
                                      "image}}"]),
    "f3net": ("duts_f3net_r50.yaml", []),
    # its gradient reference branch: parameters switched on by the loss (before DDP's wrap);
    # no ASPP and no drop-path: their random draws differ in 2 x 4 and 1 x 8; an lr for its
    # loss scale (BCE x30, MAE x100): at 0.05 round-off grew to 1.2e-5 in 2 steps (float32,
    # PVTv2-b0, measured)
    "birefnet": ("general_birefnet_swinl.yaml", [
        "model.birefnet.dec_att=''", "model.backbone_kwargs={}", "optim.lr=0.0005",
        "loss.terms={bce: 30, iou: 0.5, ssim: 5, mae: 100}"]),
}
# BatchNorm frozen, one epoch: see test_published_networks_two_processes_equal_one_process;
# one size (64 px): multi-scale under DDP (one size per step on every rank) is the reference
# run's, and at 96 px a MINet step cost twice one at 64 px
PUBLISHED_COMMON = ["model.pretrained=null", "runtime.precision=fp64", "train.keep_every=0",
                    "train.freeze_bn=true", "runtime.sync_bn=false", "train.epochs=1",
                    "data.size_list=[]"]


def published_args(network: str, data_root: Path, out: Path, name: str, batch: int = 4
                   ) -> list[str]:
    recipe, extra = PUBLISHED[network]
    return ["train", str(ROOT / "configs" / recipe), *overrides(data_root, out, name, batch),
            *PUBLISHED_COMMON, *extra]


def finetune_args(data_root: Path, out: Path, name: str) -> list[str]:
    """A fine-tuning run from the reference run's last.pt, evaluated at its start on held-out
    training pairs (model.init_from, eval.at_start, data.val_fraction); the training after
    that start is read by no test: one size (64 px)."""
    return [*overrides(data_root, out, name), "train.epochs=1", "train.keep_every=0",
            "data.size_list=[]",
            f"model.init_from={out / 'ddp' / 'checkpoints' / 'last.pt'}", "eval.at_start=true",
            "data.val_fraction=0.25"]


def full_args(data_root: Path, out: Path) -> list[str]:
    return [*overrides(data_root, out, "full"), "data.test=[{preset: duts-te}]",
            "data.test_batch_size=3", "eval.every=1", "loss.aux_weight=0",
            "runtime.sync_bn=false", "train.image_every=2", "train.keep_every=0"]


def predict_args(data_root: Path, out: Path, folder: str) -> list[str]:
    return ["predict", str(data_root / "DUTS-TE" / "DUTS-TE-Image"), "--checkpoint",
            str(out / "full" / "checkpoints" / "last.pt"), "--out", str(out / folder),
            "--batch-size", "3", "--workers", "0"]


@pytest.fixture(scope="module")
def ddp_runs(data_root, out) -> Path:
    """One torchrun launch, 2 processes: a launch's start costs more than these runs. First
    the host-sync count's run (``tests/sync_count_entry.py`` counts its first command only:
    ``sync_counts.json.RANK``), then (``tests/commands_entry.py``) the reference run x batch 4
    (no test sets: this used to hang at the end), each published network's run, the fine-tuning
    run from the reference's last.pt, and the complete run folder's `sodkit train` and `sodkit
    predict`. Each rank's output goes to the terminal and to its files (``--tee``)."""
    counted = ["train", CONFIG, *overrides(data_root, out, "sync_counts", batch=2),
               "train.log_every=1000", "runtime.sync_bn=false"]
    runs = [counted, ["train", CONFIG, *overrides(data_root, out, "ddp")]]
    runs += [published_args(network, data_root, out, f"{network}2") for network in PUBLISHED]
    runs.append(["train", CONFIG, *finetune_args(data_root, out, "ft2")])  # from ddp's last.pt
    runs += [["train", CONFIG, *full_args(data_root, out)],
             predict_args(data_root, out, "pred_ddp")]
    proc = torchrun(str(ROOT / "tests" / "sync_count_entry.py"), str(out / "sync_counts.json"),
                    *joined(*runs),
                    launcher=["--standalone", "--nproc_per_node=2",
                              f"--log-dir={out / 'torchrun-logs'}", "--tee=3"])
    assert proc.returncode == 0, proc.stderr[-4000:]
    (out / "launch.stderr").write_text(proc.stderr)
    return out


def test_no_warning_of_another_library_reaches_the_terminal(ddp_runs):
    """runtime.sync_bn=true under torchrun: torch's FutureWarnings about the collectives it
    calls (two per step and rank) went to the terminal; they go to train.log only (#33)."""
    printed = (ddp_runs / "launch.stderr").read_text()
    assert re.search(r"\w+Warning:", printed) is None, printed[-3000:]


@pytest.fixture(scope="module")
def ddp_run(ddp_runs) -> Path:
    return ddp_runs / "ddp"


def test_checkpoint_holds_every_ranks_state_and_loads_weights_only(ddp_run):
    state = last(ddp_run)
    assert (state["epoch"], state["step"], state["world_size"]) == (2, 4, 2)
    assert state["model"]["backbone.body.conv1.0.weight"].dtype == torch.float64  # precision fp64
    assert [(r["rank"], r["local_rank"]) for r in state["ranks"]] == [(0, 0), (1, 1)]
    assert len(state["rng"]) == 2
    assert not torch.equal(state["rng"][0]["torch"], state["rng"][1]["torch"])  # own streams


def test_two_processes_equal_one_process_with_the_double_batch(ddp_run, data_root, out):
    """2 x batch 4 with sync_bn == 1 x batch 8: every weight and BatchNorm buffer, after epoch 1
    (2 steps: sync BN forward and backward, the gradient all-reduce, SGD and the running
    statistics have all acted) and after epoch 2 (4 steps), within ``FP64_ATOL`` (see there:
    in float64, so that the bound follows from the arithmetic, not from one CPU's round-off).
    What this test is for shows far above it: with per-rank BatchNorm statistics (sync_bn off)
    the same two runs end 0.18 apart after epoch 1 and 0.31 after epoch 2 (measured), and a
    wrong shard or data order moves every weight by the size of an update."""
    assert main(["train", CONFIG, *overrides(data_root, out, "single", batch=8)]) == 0
    single, ddp = last(out / "single"), last(ddp_run)
    assert single["step"] == ddp["step"] == 4
    epoch1 = [last(run, "epoch_0001.pt") for run in (out / "single", ddp_run)]
    assert epoch1[0]["step"] == epoch1[1]["step"] == 2
    assert_same_model(epoch1[1]["model"], epoch1[0]["model"], atol=FP64_ATOL)
    assert_same_model(ddp["model"], single["model"], atol=FP64_ATOL)


@pytest.mark.parametrize("network", sorted(PUBLISHED))
def test_published_networks_two_processes_equal_one_process(network, ddp_runs, data_root, out):
    """minet (no side outputs: DDP needs a gradient for every trainable parameter), f3net
    (five side outputs upsampled in the loss, frozen stem, decay on every parameter) and
    birefnet (side outputs, the gradient reference branch that its loss switches on, the
    last-epochs loss schedule): 2 x batch 4 == 1 x batch 8, each on test_resnet.

    In float64 within ``FP64_ATOL``, as the reference run (MINet, F3Net and BiRefNet: 1.4e-17,
    5.6e-17 and 2.8e-17 apart, measured). BatchNorm frozen: at 64 px MINet's
    deepest SIM normalises 1 x 1 maps, 8 values a channel, where the all-reduce BatchNorm's
    float32 round-off (relative 1e-5 in one step's gradients, measured in float64 against plain
    BatchNorm) grew to 5e-2 in the weights after 4 steps at lr 0.05 on resnet18 (FPN's sync_bn
    test above covers the all-reduce BatchNorm itself)."""
    assert main(published_args(network, data_root, out, f"{network}1", batch=8)) == 0
    ddp, single = last(ddp_runs / f"{network}2"), last(out / f"{network}1")
    assert ddp["step"] == single["step"] == 2
    assert_same_model(ddp["model"], single["model"], atol=FP64_ATOL)


def test_finetuning_under_torchrun_starts_where_one_process_starts(ddp_runs, data_root, out):
    """Every rank starts from init_from's weights: the starting model's numbers on ``val``
    measured by 2 processes equal one process's, and both runs record the same source."""
    assert main(["train", CONFIG, *finetune_args(data_root, out, "ft1")]) == 0
    two = json.loads((out / "ft2" / "results_start.json").read_text())
    one = json.loads((out / "ft1" / "results_start.json").read_text())
    assert list(two) == ["val"] and two.keys() == one.keys()
    for metric, value in one["val"].items():
        assert two["val"][metric] == pytest.approx(value, abs=1e-6), metric
    init2, init1 = last(out / "ft2")["init"], last(out / "ft1")["init"]
    assert init2 == init1 and init2["fresh"] == 0 and init2["kind"] == "checkpoint"


def test_accumulation_equals_the_double_batch_with_frozen_batchnorm(data_root, out):
    """1 x batch 4 x accumulate 2 == 1 x batch 8. BatchNorm in training mode normalises each
    micro-batch by its own moments, so only frozen BatchNorm makes the two equal; multi-scale
    draws a size per micro-batch, so one size here. Largest difference 2.8e-17, with
    test_resnet and with resnet18 (measured); a wrong accumulation moves weights by the size of
    an update."""
    frozen = ["train.freeze_bn=true", "runtime.sync_bn=false", "train.keep_every=0",
              "data.size_list=[]"]
    assert main(["train", CONFIG, *overrides(data_root, out, "acc"),
                 "train.accumulate=2", *frozen]) == 0
    assert main(["train", CONFIG, *overrides(data_root, out, "big", batch=8),
                 *frozen]) == 0
    acc, big = last(out / "acc"), last(out / "big")
    assert acc["step"] == big["step"] == 4
    assert_same_model(acc["model"], big["model"], atol=FP64_ATOL)


def test_two_node_launch_resumes_a_single_node_job_bitwise(ddp_run, data_root, out):
    """Two torchrun agents (--nnodes=2, one process each) rendezvous over c10d on 127.0.0.1 and
    resume the single-node job's epoch-1 checkpoint: they end with its weights, optimizer and
    every rank's RNG state, bit for bit. (One launch for what were two tests: the two-node
    launch trained both epochs, the resume ran single-node.)"""
    snapshot = ddp_run / "checkpoints" / "epoch_0001.pt"
    port = free_port()
    cmds = [[sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
             f"--node_rank={node}", "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
             "--rdzv_id=sodkit-test", "--max_restarts=0", "-m", "sodkit", "train", CONFIG,
             *overrides(data_root, out, "twonode"), "train.keep_every=0", "--resume",
             str(snapshot)]  # keep_every 0: no epoch files besides last.pt
            for node in (0, 1)]
    for proc in processes.run_all(cmds, cwd=ROOT, env=clean_env()):
        assert proc.returncode == 0, proc.stderr[-4000:]
    resumed, straight = last(out / "twonode"), last(ddp_run)
    assert [(r["rank"], r["local_rank"]) for r in resumed["ranks"]] == [(0, 0), (1, 0)]
    assert (resumed["epoch"], resumed["step"]) == (2, 4)
    assert_same_model(resumed["model"], straight["model"])
    for key in ("rng", "optimizer"):
        assert repr(resumed[key]) == repr(straight[key]), key
    assert "resumed from" in (out / "twonode" / "train.log").read_text()


def test_slurm_launch_without_torchrun_equals_torchrun(ddp_run, data_root, out):
    """srun's variables only: master from the compact node list, port from the job id."""
    port = free_port(15000, 25000)
    cmd = [sys.executable, "-m", "sodkit", "train", CONFIG, *overrides(data_root, out, "slurm"),
           "train.keep_every=0"]  # only last.pt is compared: no epoch files
    envs = [clean_env(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank),
                      SLURM_JOB_NODELIST="127.0.0.[1-4]", SLURM_JOB_ID=str(70000 + port - 15000))
            for rank in (0, 1)]
    done = processes.run_all([cmd, cmd], cwd=ROOT, env=envs)
    for proc in done:
        assert proc.returncode == 0, proc.stderr[-4000:]
    assert (done[1].stdout, done[1].stderr) == ("", "")  # rank 1 prints nothing
    assert "slurm" in done[0].stderr
    assert_same_model(last(out / "slurm")["model"], last(ddp_run)["model"])


def test_resume_on_another_world_size_warns(ddp_run, data_root, out, caplog):
    snapshot = ddp_run / "checkpoints" / "epoch_0001.pt"
    args = [*overrides(data_root, out, "fewer"), "train.keep_every=0"]
    assert main(["train", CONFIG, *args, "--resume", str(snapshot)]) == 0
    assert "processes (world size) 2 -> 1" in caplog.text and "will not reproduce" in caplog.text


@pytest.mark.parametrize("launch", ["torchrun", "slurm"])
def test_a_failing_rank_stops_the_job_and_is_named(data_root, out, launch):
    """The other rank does not wait for the collective timeout (runtime.dist_timeout_s): the job
    ends well before it, and without idling (the watchdog of tests/processes.py fails a job
    that uses no CPU time for a minute, as one waiting for a lost peer does)."""
    entry = [str(ROOT / "tests" / "ddp_fail_entry.py"), "1", "3", "train", CONFIG,
             *overrides(data_root, out, f"fail_{launch}")]
    start = time.monotonic()
    if launch == "torchrun":
        proc = torchrun(*entry)
        codes, text = [proc.returncode], proc.stdout + proc.stderr
    else:
        port = str(free_port())
        envs = [clean_env(SLURM_PROCID=str(r), SLURM_NTASKS="2", SLURM_LOCALID=str(r),
                          SLURM_JOB_NODELIST="localhost", MASTER_PORT=port) for r in (0, 1)]
        done = processes.run_all([[sys.executable, *entry]] * 2, cwd=ROOT, env=envs)
        codes, text = [p.returncode for p in done], "\n".join(p.stdout + p.stderr for p in done)
    elapsed = time.monotonic() - start
    assert all(code != 0 for code in codes), text[-3000:]
    assert elapsed < DIST_TIMEOUT_S, elapsed
    assert "rank 1 of 2" in text and "injected failure at step 3" in text, text[-3000:]


def test_a_config_error_under_torchrun_is_one_line_and_in_the_failure_summary(data_root, out):
    """Every rank finds the same bad setting: rank 0 prints it once, and torchrun's failure
    summary shows it instead of "To enable traceback see ...". Rank 0 starts 3 s late (as on a
    loaded machine, where CI once saw rank 1 fail first and torchrun stop rank 0 before it
    printed): the other rank waits for the launcher to stop it, so rank 0 still prints."""
    proc = torchrun(str(ROOT / "tests" / "late_rank_entry.py"), "3", "train", CONFIG,
                    *overrides(data_root, out, "badlr"), "optim.lr=0")
    assert proc.returncode != 0
    said = "sodkit train: error: optim.lr: must be > 0"
    printed = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(said)]
    assert len(printed) == 1, proc.stderr[-3000:]
    summary = proc.stderr[proc.stderr.index("Root Cause"):]
    assert f"traceback : {said}" in summary and "To enable traceback" not in proc.stderr
    assert "Traceback" not in summary


def test_torchrun_train_writes_one_complete_run_folder(ddp_runs, data_root, out):
    """`sodkit train configs/demo.yaml` under torchrun: eval every epoch on both ranks (7 test
    images, batch 3: shards of 4 and 3, so rank 1 joins one empty round of the prediction
    writer), side heads off (aux_weight 0), per-rank BatchNorm statistics; then, in the same
    launch (``ddp_runs``: a launch costs more than these runs), `sodkit predict` of
    the trained checkpoint. Rank 1 prints nothing in any command of the launch. (`python -m
    sodkit` under torchrun: test_two_node_launch_resumes_a_single_node_job_bitwise)"""
    logs = out / "torchrun-logs"
    args = full_args(data_root, out)
    images = data_root / "DUTS-TE" / "DUTS-TE-Image"
    ckpt = str(out / "full" / "checkpoints" / "last.pt")
    run = out / "full"
    for name in ["config.yaml", "train.log", "checkpoints/last.pt", "checkpoints/best.pt",
                 "results.json", "results.md", "results.csv", "samples.png", "curves/pr.png",
                 "curves/fm.png"]:
        assert (run / name).is_file(), name
    assert len(list((run / "predictions" / "DUTS-TE").glob("*.png"))) == 7
    assert sorted(p.name for p in run.iterdir()) == sorted(
        [".sodkit-run", ".sodkit-files", "config.yaml", "train.log", "tb", "checkpoints",
         "predictions",
         "results.json", "results.md", "results.csv", "results_per_image.csv", "curves.json",
         "datasets.json",
         "report.html", "samples.png", "curves"])
    rank1 = [p for p in logs.rglob("*.log") if p.parent.name == "1"]
    assert rank1 and all(p.read_text() == "" for p in rank1)
    log = (run / "train.log").read_text()
    assert "global batch 8 (4 per process x 1 accumulated x 2 processes)" in log
    assert "effective base LR" in log and "epoch 2/2 step 4/4" in log
    assert "img/s" in log or "s/img" in log
    # the in-training evaluation measured rank 0's weights and buffers: 1 process agrees
    state = last(run)
    assert state["best"]["epoch"] in (1, 2)
    test_args = [*args[:3], *args[3:], "name=full_single"]
    assert main(["test", CONFIG, *test_args, "--checkpoint", str(run / "checkpoints/last.pt")]) == 0
    ddp = json.loads((run / "results.json").read_text())["DUTS-TE"]
    single_dir = out / "full_single" / "eval" / "last"  # where `sodkit test` writes
    single = json.loads((single_dir / "results.json").read_text())["DUTS-TE"]
    assert ddp.keys() == single.keys()
    for key, value in single.items():
        assert abs(ddp[key] - value) <= 1e-12, key
    for pred in (run / "predictions" / "DUTS-TE").glob("*.png"):
        assert pred.read_bytes() == (single_dir / "predictions/DUTS-TE" / pred.name).read_bytes()
    # `sodkit predict` under torchrun (above): each rank its shard, rank 0 writes, same bytes
    assert main(["predict", str(images), "--checkpoint", ckpt, "--out", str(out / "pred_one"),
                 "--batch-size", "3", "--workers", "0"]) == 0
    one = sorted((out / "pred_one").glob("*.png"))
    assert len(one) == 7
    assert [p.read_bytes() for p in one] == [(out / "pred_ddp" / p.name).read_bytes() for p in one]


def test_a_missing_peer_ends_the_job_after_the_timeout(data_root, out):
    """A rank whose peer never starts gives up after runtime.dist_timeout_s, naming itself."""
    env = clean_env(SLURM_PROCID="0", SLURM_NTASKS="2", SLURM_LOCALID="0",
                    SLURM_JOB_NODELIST="localhost", MASTER_PORT=str(free_port()))
    args = [*overrides(data_root, out, "lonely"), "runtime.dist_timeout_s=3"]
    proc = processes.run([sys.executable, "-m", "sodkit", "train", CONFIG, *args], cwd=ROOT,
                         env=env)
    assert proc.returncode != 0
    assert "rank 0 of 2" in proc.stderr and "1/2 clients joined" in proc.stderr


def test_a_training_step_asks_the_host_once(ddp_runs):
    """Per optimizer step, away from logging and epoch ends, each rank makes one collective from
    Python (the stop / save agreement, on the gloo group's host tensors) and reads one value
    of a model tensor (the finite-gradient guard, the step's one device sync on a GPU). DDP's
    gradient all-reduce runs in C++ and is not counted; the data pipeline's reads are of CPU
    tensors in the loader (counted here only because num_workers=0 runs it in the process)."""
    counts = ddp_runs / "sync_counts.json"  # its run: test_resnet, batch 2, no sync BN
    for rank in (0, 1):
        steps = json.loads(Path(f"{counts}.{rank}").read_text())
        assert len(steps) == 8  # 16 images, 2 per rank and step, 2 epochs
        for number in (2, 3, 5, 6, 7):  # not step 1 (it logs) or an epoch's last (it saves)
            step = steps[number - 1]
            reads = sorted(r for r in step["reads"] if " from data/" not in r)
            assert step["collectives"] == ["all_reduce from engine/runtime.py:any_rank"], \
                (rank, number, step["collectives"])
            assert reads == ["__bool__ from engine/step.py:_gradients_finite",
                             "tolist from engine/runtime.py:any_rank"], (rank, number, reads)
