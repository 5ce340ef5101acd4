"""``sodkit bench``: every memory variant in its own process, rows with every field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sodkit.cli import main
from tests.sod_fixtures import write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
# what bench measures (memory, seconds per step) is what other tests running beside it disturb,
# so nothing here asserts a measured figure: exact bytes, fields and orders hold under any load
pytestmark = pytest.mark.slow
TINY = ["data.size=32", "data.batch_size=2", "model.decoder_channels=8"]


def test_bench_memory_gives_four_rows(tmp_path: Path, capsys) -> None:
    out = tmp_path / "memory.json"
    code = main(["bench", "memory", str(ROOT / "configs" / "demo.yaml"), *TINY,
                 "--steps", "1", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["variant"] for r in rows] == ["plain", "checkpointing", "amp", "amp+checkpointing"]
    for row in rows:
        for key in ["peak_mb", "saved_mb", "step_s", "ratio_peak", "ratio_time"]:
            assert isinstance(row[key], float | int) and row[key] >= 0, (row["variant"], key)
    assert rows[0]["ratio_peak"] == rows[0]["ratio_time"] == 1.0
    assert [r["precision"] for r in rows] == ["fp32", "fp32", "bf16", "bf16"]
    assert [r["checkpointing"] for r in rows] == ["off", "all", "off", "all"]
    assert rows[1]["saved_mb"] < rows[0]["saved_mb"]  # machine-independent: exact bytes
    table = capsys.readouterr().out
    assert "| amp+checkpointing |" in table and "MALLOC_MMAP_THRESHOLD_" in table


def test_bench_memory_runs_birefnet_in_bf16_and_takes_a_variant_subset(tmp_path: Path) -> None:
    # birefnet's deformable convolutions have no bf16 CPU kernel (run in float32 inside);
    # two images: its image-pooled ASPP branch normalises over the batch
    out = tmp_path / "memory.json"
    code = main(["bench", "memory", str(ROOT / "configs" / "demo.yaml"), "model.name=birefnet",
                 "model.backbone=pvt_v2_b0", "data.size=64", "data.batch_size=2", "--steps", "1",
                 "--variants", "plain,amp+checkpointing", "--json", str(out)])
    assert code == 0
    rows = json.loads(out.read_text())
    assert [r["variant"] for r in rows] == ["plain", "amp+checkpointing"]
    assert [(r["precision"], r["checkpointing"]) for r in rows] == [("fp32", "off"),
                                                                    ("bf16", "all")]
    assert rows[1]["saved_mb"] < rows[0]["saved_mb"] / 4  # exact bytes, any machine


def test_a_variant_the_network_refuses_is_one_line(capsys) -> None:
    """A setting only the network's build rejects fails in the variant's process (forked by
    the variant server): its one line, no traceback, and the command's exit code."""
    code = main(["bench", "memory", str(ROOT / "configs" / "demo.yaml"), *TINY,
                 "model.backbone_kwargs={foo: 1}", "--variants", "plain", "--steps", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "bench variant model.checkpointing=off runtime.precision=fp32 failed" in err
    assert "unexpected keyword argument 'foo'" in err


def test_bench_memory_refuses_an_unknown_variant(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "memory", str(ROOT / "configs" / "demo.yaml"), "--variants", "plain,fp8"])
    assert exit_info.value.code == 2
    assert "fp8" in capsys.readouterr().err


def test_bench_speed_names_a_bottleneck(tmp_path: Path, capsys) -> None:
    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=2)
    out = tmp_path / "speed.json"
    code = main(["bench", "speed", str(ROOT / "configs" / "demo.yaml"), *TINY,
                 f"data_root={data}", "data.train=[{preset: duts-tr}]",
                 "data.test=[{preset: duts-te}]", "--steps", "2", "--rounds", "2",
                 "--json", str(out)])
    assert code == 0
    row = json.loads(out.read_text())
    for key in ["loader", "step", "loop", "eval"]:
        assert row[key] > 0, key
    assert row["bottleneck"] in ("loader", "step")
    assert [len(row["rounds"][k]) for k in ("loader", "step", "loop", "eval")] == [2, 2, 2, 1]
    said = capsys.readouterr()
    assert "bottleneck:" in said.out
    # what it will run and how long, said before it runs (#28), on stderr beside the table
    plan, estimate = said.err.splitlines()[:2]
    assert plan.startswith("bench speed: 2 rounds of 2 steps each of the loader alone"), plan
    assert "one evaluation (DUTS-TE)" in plan, plan
    assert re.fullmatch(r"estimate: about \d+:\d\d:\d\d \(h:mm:ss; one training step took "
                        r"\d+\.\d\d s, one loader batch \d+\.\d\d s\)", estimate), estimate


def test_bench_speed_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal (a pseudo-terminal with a size here), a tqdm bar counts the parts measured
    (3 per round and the evaluation), after the plan and the estimate (#28), and a last line
    says how long they took (sodkit.progress)."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=2)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    command = [sys.executable, "-m", "sodkit", "bench", "speed",
               str(ROOT / "configs" / "demo.yaml"), *TINY, f"data_root={data}",
               "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
               "--steps", "1", "--rounds", "2"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=slave,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the command ended and closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=600) == 0, seen[-3000:]
    text = seen.decode(errors="replace")
    assert text.index("bench speed: 2 rounds") < text.index("estimate: about") \
        < text.index("round 1/2: loader"), text[-3000:]
    assert "round 2/2: loop" in text and "bench speed: done, 7 parts in" in text, text[-3000:]
