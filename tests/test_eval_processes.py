"""``sodkit eval`` measured by worker processes: the same files, byte for byte, as one process,
and a bad file still ends the command with one line naming it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.evaluation.pool import MIN_IMAGES, fork_is_safe, runs, worth_processes
from sodkit.metrics.testing import realistic_pair
from tests import processes

WRITTEN = ("results.json", "results_per_image.csv", "curves.json", "results.md")


def _write(path: Path, image: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), image)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> Path:
    """Two datasets (37 and 30 images of mixed sizes) and two methods, one at another size."""
    root = tmp_path_factory.mktemp("eval_processes")
    rng = np.random.default_rng(11)
    for dataset, count in (("D1", 37), ("D2", 30)):
        for i in range(count):
            h, w = (48, 64) if i % 3 else (41, 39)
            pred, gt = realistic_pair(rng, h, w)
            _write(root / "gt" / dataset / f"{i:03d}.png", gt)
            _write(root / "a" / dataset / f"{i:03d}.png", pred)
            _write(root / "b" / dataset / f"{i:03d}.png",
                   cv2.resize(pred, (w // 2, h // 2 + 1), interpolation=cv2.INTER_AREA))
    return root


def _eval(root: Path, out: Path, *extra: str) -> int:
    return main(["eval", "--gt", f"D1={root / 'gt' / 'D1'}", "--gt", f"D2={root / 'gt' / 'D2'}",
                 "--pred", f"a={root / 'a'}", "--pred", f"b={root / 'b'}", "--out", str(out),
                 *extra])


@pytest.mark.multiprocess
def test_worker_processes_write_the_files_of_one_process(datasets, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="sodkit")
    assert _eval(datasets, tmp_path / "one", "--workers", "1") == 0
    assert "worker processes" not in caplog.text
    for workers in ("2", "3"):
        caplog.clear()
        assert _eval(datasets, tmp_path / workers, "--workers", workers) == 0
        assert f"37 images measured with {workers} worker processes" in caplog.text
        for dataset in ("D1", "D2"):
            for name in WRITTEN:
                ours = (tmp_path / workers / dataset / name).read_bytes()
                assert ours == (tmp_path / "one" / dataset / name).read_bytes(), (workers, name)


def test_a_file_that_does_not_decode_ends_the_command_with_its_name(datasets, tmp_path, capsys):
    broken = tmp_path / "broken"
    for source in (datasets / "a").rglob("*.png"):
        target = broken / source.relative_to(datasets / "a")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    (broken / "D2" / "017.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40))
    code = main(["eval", "--gt", f"D1={datasets / 'gt' / 'D1'}", "--gt",
                 f"D2={datasets / 'gt' / 'D2'}", "--pred", f"a={broken}", "--out",
                 str(tmp_path / "out"), "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 2
    assert "017.png" in err and "Traceback" not in err


def test_processes_only_where_they_pay():
    assert not worth_processes(1, 10_000, explicit=False)
    assert not worth_processes(1, 10_000, explicit=True)
    assert not worth_processes(2, MIN_IMAGES - 1, explicit=False)
    assert worth_processes(2, MIN_IMAGES, explicit=False)
    assert worth_processes(2, 3, explicit=True)


def test_runs_split_the_images_into_several_tasks_per_worker():
    assert runs(1000, 2) == 32  # capped: the last task ends soon after the others
    assert runs(40, 2) == 3
    assert runs(1, 8) == 1


@pytest.mark.multiprocess
def test_the_command_forks_its_workers_and_writes_the_same_files(datasets, tmp_path):
    """``python -m sodkit eval`` forks its workers from itself (nothing ran OpenCV's thread pool
    there); in this test process, where it has run, forking is refused (the fork server)."""
    assert not fork_is_safe()
    fresh = processes.run(
        [sys.executable, "-c", "import sodkit.resources as r; r.mark_started_by_command(); "
         "from sodkit.evaluation.pool import fork_is_safe; print(fork_is_safe())"])
    assert fresh.stdout.strip() == "True", fresh.stderr
    assert _eval(datasets, tmp_path / "one", "--workers", "1") == 0
    done = processes.run(
        [sys.executable, "-m", "sodkit", "eval", "--gt", f"D1={datasets / 'gt' / 'D1'}",
         "--gt", f"D2={datasets / 'gt' / 'D2'}", "--pred", f"a={datasets / 'a'}",
         "--pred", f"b={datasets / 'b'}", "--out", str(tmp_path / "command"), "--workers", "2"])
    assert done.returncode == 0, done.stderr
    assert "37 images measured with 2 worker processes" in done.stderr
    for dataset in ("D1", "D2"):
        for name in WRITTEN:
            assert ((tmp_path / "command" / dataset / name).read_bytes()
                    == (tmp_path / "one" / dataset / name).read_bytes()), name


@pytest.mark.multiprocess
def test_a_worker_that_dies_ends_the_command_in_one_line(tmp_path):
    """A worker killed mid-run (the system's OOM killer, say) ends ``sodkit eval`` with exit
    code 2 and one line that says what to do, not a pool's traceback or a hang."""
    pred, gt = realistic_pair(np.random.default_rng(2), 320, 320)
    for folder, image in (("gt", gt), ("pred", pred)):
        _write(tmp_path / folder / "000.png", image)
        data = (tmp_path / folder / "000.png").read_bytes()
        for i in range(1, 1500):
            (tmp_path / folder / f"{i:03d}.png").write_bytes(data)
    proc = processes.start(
        [sys.executable, "-m", "sodkit", "eval", "--gt", str(tmp_path / "gt"), "--pred",
         f"m={tmp_path / 'pred'}", "--out", str(tmp_path / "out"), "--workers", "2"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines, after = [], None
    for line in processes.lines(proc, proc.stderr, seen=lines):
        if "images, methods" in line and after is None:  # the workers are running
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            os.kill(int(children[0]), signal.SIGKILL)
            after = len(lines)
    rest = "".join(lines[after:])
    assert processes.wait(proc) == [2], "".join(lines)
    assert "sodkit eval: error: a worker process of sodkit eval died" in rest
    assert "Traceback" not in rest
