"""Long work says what it will do and shows progress (#33 items 1 and 9): without a terminal a
line every SODKIT_PROGRESS_S seconds (0 here: one per item), also while one item takes long,
for bench memory, import-weights, export, test and convert-checkpoint; rates below one per
second as seconds per item (the training log said "0.0 img/s")."""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from collections import OrderedDict

import numpy as np
import pytest
import torch

from sodkit.errors import UserError
from sodkit.progress import Progress, format_rate, interval_s
from tests.conftest import ROOT
from tests.sod_fixtures import tiny_overrides, write_tiny_checkpoint
from tests.test_import_weights import hollow, save_legacy

DEMO = ROOT / "configs" / "demo.yaml"


def test_slow_rates_are_seconds_per_item():
    assert format_rate(0.04, "img") == "25.0 s/img"  # was "0.0 img/s"
    assert format_rate(0.5, "img") == "2.0 s/img"
    assert format_rate(12.34, "img") == "12.3 img/s"
    assert format_rate(0.0, "img") == "? img/s"
    assert format_rate(3, "image", "images") == "3.0 images/s"
    assert format_rate(0.25, "image", "images") == "4.0 s/image"


def test_a_line_per_item_and_one_at_the_end(monkeypatch, caplog):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0")
    caplog.set_level(logging.INFO)
    with Progress(3, "work", unit="image", summary=True) as progress:
        for _ in range(3):
            progress.update(postfix="x")
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == [line for line in lines if line.startswith("work: ") and "/3 " in line]
    assert lines[0].startswith("work: 1/3 images (33%), ") and lines[0].endswith(", x")
    assert lines[-1].startswith("work: done, 3 images in 0:00:0")
    caplog.clear()
    with Progress(2, "quiet", unit="resamples") as progress:  # the caller says the end itself
        progress.update(2)
    assert [r.getMessage().split(",")[0] for r in caplog.records] == [
        "quiet: 2/2 resamples (100%)"]


def test_early_says_the_first_update_then_waits(monkeypatch, caplog):
    """``early`` (predict): a line after the first batch, then none until the interval."""
    monkeypatch.setenv("SODKIT_PROGRESS_S", "60")
    caplog.set_level(logging.INFO)
    with Progress(5, "predicting", unit="image", summary=True, early=True) as progress:
        progress.update(2)
        progress.update(2)
        progress.update(1)
    assert [r.getMessage().split(", ")[0] for r in caplog.records] == [
        "predicting: 2/5 images (40%)", "predicting: done"]


def test_megabytes_of_a_resumed_download(monkeypatch, caplog):
    """``scale`` says bytes as MB (no plural); ``initial`` counts in the share, not the rate."""
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0")
    caplog.set_level(logging.INFO)
    with Progress(4_000_000, "model", unit="MB", scale=1e6, initial=3_000_000) as progress:
        time.sleep(0.5)
        progress.update(1_000_000)
    line = caplog.records[-1].getMessage()
    assert line.startswith("model: 4.0/4.0 MB (100%), "), line
    assert float(line.split(", ")[1].removesuffix(" MB/s")) < 2.5, line  # 1 MB in >= 0.5 s


def test_a_long_item_still_gets_lines(monkeypatch, caplog):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0.2")
    caplog.set_level(logging.INFO)
    with Progress(2, "slow", unit="stage") as progress:
        time.sleep(0.9)  # one item: no update for longer than the interval
        progress.update()
    waiting = [r.getMessage() for r in caplog.records if "0/2 stages" in r.getMessage()]
    assert len(waiting) >= 2, [r.getMessage() for r in caplog.records]


def test_a_bad_interval_is_one_line(monkeypatch, run_cli):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "lots")
    with pytest.raises(UserError, match="SODKIT_PROGRESS_S"):
        interval_s()
    done = run_cli("info", str(DEMO))
    assert done.returncode == 2 and "SODKIT_PROGRESS_S='lots'" in done.stderr


@pytest.fixture
def tiny_checkpoint(tmp_path):
    return write_tiny_checkpoint(tmp_path / "tiny.pt")


def progress_lines(stderr: str, desc: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(f"{desc}: ")]


def test_commands_show_progress_without_a_terminal(tmp_path, tiny_checkpoint, data_root,
                                                   run_cli, monkeypatch):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0")
    done = run_cli("export", "--checkpoint", str(tiny_checkpoint), "--onnx",
                   str(tmp_path / "m.onnx"))
    assert done.returncode == 0, done.stderr
    assert "export: " in done.stderr.splitlines()[0] and "onnxruntime" in done.stderr
    lines = progress_lines(done.stderr, "export")
    assert any("1/4 stages" in line for line in lines) and "export: done, 4 stages" in \
        done.stderr, done.stderr

    done = run_cli("test", str(DEMO), *tiny_overrides(data_root, tmp_path, "t"),
                   "model.backbone=test_resnet", "model.decoder_channels=8", "data.size=32",
                   "data.test_batch_size=2", "--checkpoint", str(tiny_checkpoint),
                   "--out", str(tmp_path / "tested"))
    assert done.returncode == 0, done.stderr
    lines = progress_lines(done.stderr, "evaluating DUTS-TE")
    assert [line.split(",")[0] for line in lines[:3]] == [
        "evaluating DUTS-TE: 2/6 images (33%)", "evaluating DUTS-TE: 4/6 images (67%)",
        "evaluating DUTS-TE: 6/6 images (100%)"], done.stderr

    legacy = tmp_path / "old.pt"
    state = torch.load(tiny_checkpoint, weights_only=True)
    np.random.seed(7)
    state["rng"] = {"python": random.getstate(), "numpy": np.random.get_state()}
    torch.save(state, legacy)
    done = run_cli("convert-checkpoint", str(legacy))
    assert done.returncode == 0, done.stderr
    assert "convert-checkpoint: 1/1 file (100%)" in done.stderr, done.stderr

    source = save_legacy(OrderedDict(hollow("f3net-r50")), tmp_path / "model-32")
    done = run_cli("import-weights", "f3net-r50", str(source), "--out",
                   str(tmp_path / "f3.safetensors"))
    assert done.returncode == 0, done.stderr
    lines = progress_lines(done.stderr, "import-weights")
    assert lines[0].startswith("import-weights: ") and "-> " in lines[0]  # what it will do
    assert [line.split(",")[0] for line in lines[1:5]] == [
        f"import-weights: {i}/4 stages ({25 * i}%)" for i in range(1, 5)], done.stderr


@pytest.mark.slow
def test_bench_memory_shows_progress_in_a_log(run_cli, monkeypatch):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0")
    done = run_cli("bench", "memory", str(DEMO), "--variants", "plain", "--steps", "1",
                   "model.backbone=test_resnet", "model.decoder_channels=8", "data.size=64",
                   "data.batch_size=2")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("bench memory: 1 variant (plain), each in a fresh process")
    assert [line.split(",")[0] for line in progress_lines(done.stderr, "bench memory")[1:4]] == [
        "bench memory: 1/3 stages (33%)", "bench memory: 2/3 stages (67%)",
        "bench memory: 3/3 stages (100%)"], done.stderr
    assert "| plain |" in done.stdout


_ON_A_PTY = """
import logging, time
logging.basicConfig(level=logging.INFO, format="%(message)s")
from sodkit.progress import Progress
with Progress(3, "work", unit="image", summary=True) as progress:
    for _ in range(3):
        time.sleep(0.05)
        progress.update()
"""


@pytest.mark.parametrize(("lines", "columns"), [(0, 0), (0, 100), (24, 100)])
def test_a_terminal_without_a_size_gets_the_log_lines(lines: int, columns: int) -> None:
    """On a pseudo-terminal of 24 x 100, tqdm's bar; on one without a size (``script`` in a CI
    job), where tqdm drew nothing at all, the log lines (#35 item 5: feedback everywhere)."""
    import fcntl
    import pty
    import struct
    import termios

    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr on the pty
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        os.environ["SODKIT_PROGRESS_S"] = "0"
        os.execv(sys.executable, [sys.executable, "-c", _ON_A_PTY])
    out = b""
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # the child is gone
            break
        if not data:
            break
        out += data
    os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert "work: done, 3 images in " in text, text
    if lines:
        assert "/3 [00:0" in text and "image/s" in text, text  # the bar, its rate
    else:
        assert "work: 1/3 images (33%)" in text and "work: 3/3 images (100%)" in text, text
