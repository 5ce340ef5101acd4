"""A stop right after start-up (#32 item 7): a SIGTERM while `sodkit train` is still importing
torch ended the process by the signal (exit -15); `train` now installs its stop handling first
thing, so any SIGTERM ends it with exit 75 and one line, and nothing is written. Epoch-counted
settings a run never reaches are said at its start (#32 item 6)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests import processes
from tests.conftest import ROOT
from tests.sod_fixtures import tiny_overrides

DEMO = ROOT / "configs" / "demo.yaml"


def _maps_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def test_sigterm_while_torch_is_imported_exits_75_and_writes_nothing(data_root, tmp_path):
    args = [sys.executable, "-m", "sodkit", "train", str(DEMO),
            *tiny_overrides(data_root, tmp_path, "early", epochs=1)]
    proc = processes.start(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.monotonic() + 120
        while not _maps_torch(proc.pid) and proc.poll() is None:
            assert time.monotonic() < deadline, "torch was never imported"
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)  # torch is being imported: long before any training
        out, err = proc.communicate(timeout=300)
    finally:
        processes.kill([proc])
    assert proc.returncode == 75, (proc.returncode, err[-2000:])
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(
        "sodkit train: stopped by SIGTERM before training started: nothing was trained or "
        "written"), err[-2000:]
    assert not (tmp_path / "early").exists()


def test_settings_beyond_the_run_are_said_at_its_start(data_root, tmp_path, run_cli):
    args = ["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "short", epochs=1),
            "loss.schedule=[{from_epoch: 5, scale: {bce: 0}}, {from_epoch: -1, scale: {iou: 2}}]",
            "schedule.name=step", "schedule.milestones=[3, 1000]", "eval.every=4",
            "train.keep_every=2", "train.checkpoint_every=3", "data.train=[]"]
    done = run_cli(*args)  # no training data: it stops after its start, before any work
    assert done.returncode == 2
    warned = done.stderr.splitlines()
    for words in ("loss.schedule.0: from epoch 5, after the run's last epoch (train.epochs 1)",
                  "schedule.milestones: 3 after the run's last epoch",
                  "eval.every: 4, longer than the run (1 epoch): only the final evaluation",
                  "train.keep_every: 2, longer than the run", "train.checkpoint_every: 3"):
        assert sum(words in line for line in warned) == 1, (words, done.stderr)
    assert "loss.schedule.1" not in done.stderr and "1000" not in done.stderr
