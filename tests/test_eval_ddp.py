"""``sodkit eval`` under ``torchrun`` (2 real processes, gloo on the CPU): each rank measures a
shard of every dataset, rank 0 merges and writes, and every file equals the one-process files
byte for byte; a file that does not decode on one rank ends the whole job with one line.

Two datasets of odd sizes (7 and 5 images, uneven shards 4 + 3 and 3 + 2) and two methods, one
of them at other sizes than the GT (the resize path). The same launch (``tests/commands_entry.py``:
a launch's start costs more than these evaluations) then evaluates video datasets with
``--groups --allow-missing`` (a method that lacks frames of both ranks' shards, and a whole
dataset), and last the inputs with one truncated file, which ends the launch. It starts with
``sodkit test`` of the session's trained run (uneven shards of its 6 test images, batch 4).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.config import RuntimeCfg
from sodkit.metrics.testing import realistic_pair
from tests import processes
from tests.commands_entry import joined
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {"X": 7, "Y": 5}
FILES = ("results.json", "results.csv", "results.md", "results_per_image.csv", "curves.json")
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
               "TORCHELASTIC_ERROR_FILE", "SLURM_PROCID", "SLURM_NTASKS")

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


GROUPS = {"V": {"g1": 5, "g2": 4}, "W": {"g3": 3}}  # video datasets: frames per group
LACKING = ("V/g1/frame2.png", "V/g2/frame4.png")  # method m's, in rank 0's and rank 1's shard


def torchrun(*args: str) -> subprocess.CompletedProcess:
    """``args`` (a module's ``-m NAME ...`` or a script's path and arguments) in 2 processes."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    return processes.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node=2", *args], cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """gt/<dataset>/*.png and preds/<method>/<dataset>/*.png; method b is smaller than the GT."""
    root = tmp_path_factory.mktemp("eval_ddp")
    rng = np.random.default_rng(5)
    for dataset, count in DATASETS.items():
        for i in range(count):
            h, w = int(rng.integers(30, 70)), int(rng.integers(30, 70))
            pred, gt = realistic_pair(rng, h, w)
            small = cv2.resize(pred, (w // 2 + 3, h // 2 + 1), interpolation=cv2.INTER_AREA)
            for folder, image in ((root / "gt" / dataset, gt), (root / "preds/a" / dataset, pred),
                                  (root / "preds/b" / dataset, small)):
                folder.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(folder / f"im{i:02d}.png"), image)
    for dataset, groups in GROUPS.items():  # video/{gt,a,m}/<dataset>/<group>/frameN.png
        for group, count in groups.items():
            for frame in range(1, count + 1):
                pred, gt = realistic_pair(rng, 32 + (frame > 2), 40)  # sizes change once:
                # consecutive frames mostly of one size, as Flicker compares them
                for method, image in (("gt", gt), ("a", pred), ("m", 255 - pred)):
                    path = root / "video" / method / dataset / group / f"frame{frame}.png"
                    if method == "m" and (dataset == "W" or path.relative_to(
                            root / "video" / "m").as_posix() in LACKING):
                        continue  # m lacks two frames of V and the whole of W
                    path.parent.mkdir(parents=True, exist_ok=True)
                    assert cv2.imwrite(str(path), image)
    return root


def eval_args(root: Path, out: Path) -> list[str]:
    gts = [arg for name in DATASETS for arg in ("--gt", f"{name}={root / 'gt' / name}")]
    return ["eval", *gts, "--pred", f"a={root / 'preds/a'}", "--pred", f"b={root / 'preds/b'}",
            "--out", str(out)]


def grouped_args(root: Path, out: Path) -> list[str]:
    gts = [arg for name in GROUPS for arg in ("--gt", f"{name}={root / 'video/gt' / name}")]
    return ["eval", *gts, "--pred", f"a={root / 'video/a'}", "--pred", f"m={root / 'video/m'}",
            "--groups", "--allow-missing", "--compute", "HCE,BIoU,Flicker", "--out", str(out)]


FAMILIES = ["--compute", "all"]  # the optional metric families merge as exactly


def sodkit_test_args(trained: Path, data_root: Path, out: Path) -> list[str]:
    """``sodkit test`` of the session's trained run (``trained``), into ``out/t_ddp``."""
    return ["test", str(ROOT / "configs" / "demo.yaml"), *tiny_overrides(data_root, out, "t_ddp"),
            "--checkpoint", str(trained / "checkpoints" / "last.pt")]


@pytest.fixture(scope="module")
def launch(inputs, trained, data_root, tmp_path_factory) -> dict:
    """One 2-process launch: ``sodkit test`` of the trained run, the evaluation, the grouped
    one, then the evaluation of a copy of the inputs whose ``preds/b/X/im06.png`` is truncated
    (index 6 of 7: in rank 1's shard only), which fails and ends the launch."""
    out = tmp_path_factory.mktemp("eval_launch")
    bad_root = out / "inputs"
    shutil.copytree(inputs, bad_root)
    bad = bad_root / "preds/b/X/im06.png"
    bad.write_bytes(bad.read_bytes()[:60])
    runs = [sodkit_test_args(trained, data_root, out), [*eval_args(inputs, out / "two"), *FAMILIES],
            grouped_args(inputs, out / "two_groups"), eval_args(bad_root, out / "bad")]
    start = time.monotonic()
    proc = torchrun(str(ROOT / "tests" / "commands_entry.py"), *joined(*runs))
    return {"proc": proc, "elapsed": time.monotonic() - start, "out": out, "bad": bad}


def test_two_process_test_equals_single_process(trained, launch):
    """``sodkit test`` under torchrun (2 gloo processes): uneven shards (6 images, batch 4),
    the numbers of the one-process run's final evaluation."""
    run = launch["out"] / "t_ddp" / "eval" / "last"
    assert (run / "results.json").is_file(), launch["proc"].stderr[-3000:]
    ddp = json.loads((run / "results.json").read_text())
    single = json.loads((trained / "results.json").read_text())
    assert ddp.keys() == single.keys()
    for key, value in single["DUTS-TE"].items():
        assert ddp["DUTS-TE"][key] == pytest.approx(value, abs=1e-9), key
    assert len(list((run / "predictions" / "DUTS-TE").glob("*.png"))) == 6


def test_torchrun_eval_equals_one_process_byte_for_byte(inputs, launch, tmp_path):
    assert main([*eval_args(inputs, tmp_path / "one"), *FAMILIES]) == 0
    assert main(grouped_args(inputs, tmp_path / "one_groups")) == 0
    proc, two_root = launch["proc"], launch["out"]
    assert (two_root / "two_groups" / "results.json").is_file(), proc.stderr[-4000:]
    # the images were split, each measured once: rank 0 reports the gathered record counts
    assert "X: 7 images measured by 2 processes (4 + 3)" in proc.stderr, proc.stderr[-3000:]
    assert "Y: 5 images measured by 2 processes (3 + 2)" in proc.stderr, proc.stderr[-3000:]
    for dataset in DATASETS:
        one, two = tmp_path / "one" / dataset, two_root / "two" / dataset
        for name in FILES:
            assert (one / name).read_bytes() == (two / name).read_bytes(), (dataset, name)
        results = json.loads((two / "results.json").read_text())
        assert set(results) == {"a", "b"} and results["a"] != results["b"]
        assert {"HCE", "maxMSIoU", "siMAE", "maxBIoU", "mBA", "CM", "MSE"} <= set(results["a"])
        rows = (two / "results_per_image.csv").read_text().splitlines()
        assert len(rows) == 1 + 2 * DATASETS[dataset]  # header + every image once per method
    for name in ("results.json", "evaluation.json"):
        assert (tmp_path / "one" / name).read_bytes() == (two_root / "two" / name).read_bytes()
    _check_groups_with_missing(proc.stderr, tmp_path / "one_groups", two_root / "two_groups")


def _check_groups_with_missing(stderr: str, one: Path, two: Path) -> None:
    """--groups --allow-missing under torchrun: the one-process files, byte for byte; m scored
    on the 7 frames of V it has, skipped on W, each said once (by rank 0)."""
    for dataset in GROUPS:
        for name in FILES:
            assert (one / dataset / name).read_bytes() == (two / dataset / name).read_bytes(), (
                dataset, name)
    for name in ("results.json", "evaluation.json"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    results = json.loads((two / "results.json").read_text())
    assert set(results) == {"V/a", "V/m", "W/a"}  # m skipped on W
    assert {"HCE", "maxBIoU", "Flicker"} <= set(results["V/m"])  # Flicker: rank 0, in order
    assert 0 < results["V/m"]["Flicker"] < 1
    rows = (two / "V" / "results_per_image.csv").read_text().splitlines()
    stems = [row.split(",")[2] for row in rows[1:] if row.split(",")[1] == "m"]
    assert len(stems) == 7 and "g1/frame2" not in stems and "g2/frame4" not in stems
    assert len(rows) == 1 + 9 + 7
    said = [line for line in stderr.splitlines() if "(--allow-missing)" in line]
    assert len(said) == 2, said  # rank 0 alone, once each
    assert "method 'm': 2 of 9 predictions missing for dataset V; evaluated on the 7" in said[0]
    assert "method 'm': no folder for dataset W" in said[1]


def test_a_bad_file_on_one_rank_ends_every_rank_with_one_line(launch):
    proc, bad = launch["proc"], launch["bad"]
    assert proc.returncode != 0
    # rank 0 does not wait for the collective timeout (runtime.dist_timeout_s): the job ends
    # well before it, and without idling (tests/processes.py fails a job idle for a minute)
    assert launch["elapsed"] < RuntimeCfg().dist_timeout_s, launch["elapsed"]
    said = f"sodkit eval: error: cannot decode image file {bad}: truncated"
    printed = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(said)]
    assert len(printed) == 1, proc.stderr[-3000:]  # rank 0 prints what rank 1 met, once
    summary = proc.stderr[proc.stderr.index("Root Cause"):]
    assert "Traceback" not in summary, summary
    assert not (launch["out"] / "bad" / "X" / "results.json").exists()
