"""Outputs get the user's permissions, and a write that fails ends the command in one line
naming the file, leaving what was there before intact (docs/reliability.md, sections 6 and 9).

A full disk cannot be made as root without mounting one, so a file size limit in the child
process stands in for it (``RLIMIT_FSIZE``: a write past the limit fails with ``EFBIG``, "File
too large", through the same code path as ``ENOSPC``); a folder that may not be written even by
root is one under ``/sys`` (``EPERM``, or ``EROFS`` where sysfs is mounted read-only).
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from tests import processes
from tests.sod_fixtures import write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def run_limited(limit: int | None, *args: str) -> subprocess.CompletedProcess:
    """``python -m sodkit ARGS`` of this checkout, files limited to ``limit`` bytes."""

    def small_disk() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return processes.run([sys.executable, "-m", "sodkit", *args], cwd=ROOT,
                         preexec_fn=small_disk)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def no_temporary_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp-" in p.name]


@pytest.fixture
def masks(tmp_path: Path) -> tuple[Path, Path]:
    """A GT folder and a prediction folder of four masks."""
    rng = np.random.default_rng(0)
    gt, pred = tmp_path / "gt", tmp_path / "pred"
    for folder in (gt, pred):
        folder.mkdir()
    for i in range(4):
        mask = np.zeros((48, 64), np.uint8)
        mask[10:30, 12 + i:40] = 255
        cv2.imwrite(str(gt / f"m{i}.png"), mask)
        noisy = np.clip(mask * 0.8 + rng.integers(0, 60, mask.shape), 0, 255).astype(np.uint8)
        cv2.imwrite(str(pred / f"m{i}.png"), noisy)
    return gt, pred


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode)
            for p in folder.rglob("*") if p.is_file()}


# ------------------------------------------------------------------ permissions
def test_every_output_follows_the_umask(tmp_path, masks):
    """``sodkit export`` wrote its ``.onnx`` ``-rw-------`` (tempfile.mkstemp); now every file
    sodkit writes is ``0666 & ~umask``, as a file the user creates."""
    pytest.importorskip("openpyxl")
    import torch

    from sodkit.torchfile import save_atomic
    from tests.test_export import _checkpoint

    gt, pred = masks
    checkpoint = _checkpoint(tmp_path, "fpn")
    previous = os.umask(0o027)
    try:
        assert main(["eval", "--gt", str(gt), "--pred", f"m={pred}", "--out",
                     str(tmp_path / "ev"), "--latex", str(tmp_path / "t.tex"), "--xlsx",
                     str(tmp_path / "t.xlsx")]) == 0
        assert main(["report", str(tmp_path / "ev"), "--out", str(tmp_path / "r.html")]) == 0
        assert main(["export", "--checkpoint", str(checkpoint), "--onnx",
                     str(tmp_path / "m.onnx"), "--size", "64", "64"]) == 0
        save_atomic({"x": torch.zeros(2)}, tmp_path / "saved.pt")
        os.umask(0o002)
        assert main(["eval", "--gt", str(gt), "--pred", f"m={pred}", "--out",
                     str(tmp_path / "ev2")]) == 0
    finally:
        os.umask(previous)
    written = {**_modes(tmp_path / "ev"), **{name: stat.S_IMODE((tmp_path / name).stat().st_mode)
                                             for name in ("t.tex", "t.xlsx", "r.html", "m.onnx",
                                                          "saved.pt")}}
    assert len(written) >= 12 and set(written.values()) == {0o640}, written
    assert set(_modes(tmp_path / "ev2").values()) == {0o664}
    assert no_temporary_files(tmp_path)


# ------------------------------------------------------------------ a full disk
def test_a_full_disk_ends_eval_in_one_line_naming_the_file(tmp_path, masks):
    gt, pred = masks
    out = tmp_path / "out"
    line = one_error_line(run_limited(3000, "eval", "--gt", str(gt), "--pred", f"m={pred}",
                                      "--out", str(out)))
    assert line.startswith(f"sodkit eval: error: could not write {out}/")
    assert "File too large" in line and "choose another output folder" in line
    assert no_temporary_files(out)


def test_a_full_disk_keeps_the_previous_report_and_says_so(tmp_path, masks):
    gt, pred = masks
    assert main(["eval", "--gt", str(gt), "--pred", f"m={pred}", "--out",
                 str(tmp_path / "ev")]) == 0
    page = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "ev"), "--out", str(page)]) == 0
    before = page.read_bytes()
    line = one_error_line(run_limited(len(before) // 2, "report", str(tmp_path / "ev"),
                                      "--out", str(page)))
    assert f"could not write {page}: File too large; the file there before is intact" in line
    assert page.read_bytes() == before and no_temporary_files(tmp_path)


@pytest.mark.slow
def test_a_full_disk_ends_predict_and_export_in_one_line(tmp_path):
    from tests.test_export import _checkpoint

    checkpoint = _checkpoint(tmp_path, "fpn")
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(1)
    for i in range(3):
        cv2.imwrite(str(images / f"p{i}.jpg"), rng.integers(0, 255, (64, 64, 3), np.uint8))
    out = tmp_path / "masks"
    # --workers 0: the limit would also bound the loader workers' shared memory files
    line = one_error_line(run_limited(200, "predict", "--checkpoint", str(checkpoint),
                                      str(images), "--out", str(out), "--workers", "0"))
    assert line.startswith(f"sodkit predict: error: could not write {out}/p")
    assert no_temporary_files(out)
    onnx = tmp_path / "m.onnx"
    line = one_error_line(run_limited(20_000, "export", "--checkpoint", str(checkpoint),
                                      "--onnx", str(onnx), "--size", "64", "64"))
    assert f"could not write {onnx}: File too large" in line
    assert not onnx.exists() and no_temporary_files(tmp_path)


@pytest.mark.slow
def test_a_full_disk_ends_train_in_one_line_that_says_how_to_resume(tmp_path):
    """The TensorBoard writer thread and the log file meet the limit first: each is one
    warning line (no traceback), then the first output that does not fit stops the run."""
    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=2)
    args = [f"data_root={data}", f"output_root={tmp_path / 'runs'}", "name=r",
            "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]", "data.size=64",
            "data.batch_size=4", "data.num_workers=0", "model.backbone=resnet18",
            "model.decoder_channels=8", "train.epochs=1", "train.log_every=1"]
    line = one_error_line(run_limited(2500, "train", str(DEMO), *args))
    assert line.startswith(f"sodkit train: error: could not write {tmp_path / 'runs' / 'r'}/")
    assert "File too large" in line and "--resume auto" in line


# ------------------------------------------------------------------ a forbidden folder
def test_a_folder_that_may_not_be_written_is_one_line(masks):
    gt, pred = masks
    out = Path("/sys/sodkit-test-output")
    proc = run_limited(None, "eval", "--gt", str(gt), "--pred", f"m={pred}", "--out", str(out))
    if proc.returncode == 0:  # pragma: no cover - a system where /sys takes new folders
        pytest.skip("/sys accepted a new folder here")
    line = one_error_line(proc)
    assert line.startswith((f"sodkit eval: error: cannot create or open {out}: ",
                            f"sodkit eval: error: cannot write {out}: "))  # EPERM, EROFS
    assert "choose another output folder" in line
