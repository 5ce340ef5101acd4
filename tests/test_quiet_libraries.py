"""No line of another library reaches the terminal (#33): every command that writes figures
(``eval`` with every curve, ``report --figures`` in PNG, PDF and SVG, ``train``'s report) runs
as the ``sodkit`` command in its own process, and every line it writes on stderr is one that
sodkit's own loggers emitted (``tests/own_lines_entry.py`` records them). Before the fix,
``report --figures`` printed 59 lines of fontTools' font subsetting per PDF."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.metrics.testing import realistic_pair
from tests import processes
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
ENTRY = str(ROOT / "tests" / "own_lines_entry.py")
WARNING_LINE = re.compile(r"\b\w*(Warning|Error)\b:|^(DEBUG|INFO|WARNING):|fontTools")


def sodkit(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run ``sodkit ARGS``; its stdout and its stderr lines that sodkit did not log."""
    own_file = tmp_path / f"own-{len(list(tmp_path.glob('own-*')))}.jsonl"
    done = processes.run([sys.executable, ENTRY, str(own_file), *args], cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    own = {line for message in map(json.loads, own_file.read_text().splitlines())
           for line in message.splitlines()}
    foreign = [line for line in done.stderr.splitlines() if line.strip() and line not in own]
    return done.stdout, "\n".join(foreign)


def assert_quiet(stdout: str, foreign: str) -> None:
    assert not foreign, f"lines of another library on stderr:\n{foreign[:3000]}"
    noisy = [line for line in stdout.splitlines() if WARNING_LINE.search(line)]
    assert not noisy, noisy


@pytest.fixture()
def folders(tmp_path: Path) -> Path:
    rng = np.random.default_rng(5)
    for i in range(8):
        pred, gt = realistic_pair(rng, 32, 40)
        for name, image in (("gt", gt), ("a", pred), ("b", np.roll(pred, 3, axis=1))):
            (tmp_path / name).mkdir(exist_ok=True)
            assert cv2.imwrite(str(tmp_path / name / f"im{i}.png"), image)
    return tmp_path


def test_eval_and_report_figures_print_no_line_of_another_library(folders):
    out = folders / "ev"
    assert_quiet(*sodkit(folders, "eval", "--gt", str(folders / "gt"), "--pred",
                         str(folders / "a"), "--pred", str(folders / "b"), "--out", str(out),
                         "--curves", "all", "--workers", "2", "--latex", str(folders / "t.tex"),
                         "--xlsx", str(folders / "t.xlsx")))
    assert (out / "dice.png").exists()
    assert_quiet(*sodkit(folders, "report", str(out), "--out", str(folders / "page.html"),
                         "--figures", str(folders / "figures"), "--curves", "all"))
    for kind in ("pr", "fm", "em", "iou", "dice"):
        for fmt in ("png", "pdf", "svg"):
            assert (folders / "figures" / f"{kind}.{fmt}").stat().st_size > 0


@pytest.mark.slow
def test_train_and_its_report_print_no_line_of_another_library(data_root, tmp_path):
    overrides = tiny_overrides(data_root, tmp_path, "quiet", epochs=1)
    overrides += ["model.backbone=test_resnet", "model.pretrained=null"]
    assert_quiet(*sodkit(tmp_path, "train", str(ROOT / "configs" / "demo.yaml"), *overrides))
    assert (tmp_path / "quiet" / "report.html").stat().st_size > 0
