"""``sodkit eval`` says what it computes, shows progress without a terminal and times the whole
of its work (#33): ``--compute all`` logged "10 images measured in 0.23 s" and then computed the
families for 9 s more without a word. Run in this process (its stderr is no terminal), with
progress lines every 0.2 s (``SODKIT_PROGRESS_S``)."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.metrics.testing import realistic_pair


@pytest.fixture()
def folders(tmp_path: Path) -> Path:
    rng = np.random.default_rng(8)
    for i in range(12):
        pred, gt = realistic_pair(rng, 48, 60)
        for name, image in (("gt", gt), ("a/D", pred), ("b/D", 255 - pred),
                            ("img", np.dstack([pred, gt, pred]))):
            (tmp_path / name).mkdir(parents=True, exist_ok=True)
            assert cv2.imwrite(str(tmp_path / name / f"im{i}.png"), image)
    return tmp_path


def test_compute_all_says_what_it_computes_and_times_the_whole(folders, run_cli, monkeypatch):
    monkeypatch.setenv("SODKIT_PROGRESS_S", "0.2")
    done = run_cli("eval", "--gt", f"D={folders / 'gt'}", "--pred", str(folders / "a"),
                   "--pred", str(folders / "b"), "--out", str(folders / "ev"), "--compute",
                   "all", "--images", f"D={folders / 'img'}", "--ci", "--ci-resamples", "100")
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert re.search(r"D: 12 images, methods: a, b; computing the standard metrics and MSE, "
                     r"HCE, SI, MSIoU, BIoU, mBA, CM, CCM, matting; 95% intervals by 100 "
                     r"bootstrap", err), err
    assert re.search(r"D: \d+/12 img", err), err  # progress lines while measuring
    measured = float(re.search(r"D: 12 images measured in ([0-9.]+) s", err)[1])
    total = re.search(r"evaluated 1 dataset x 2 methods in ([0-9.]+) s \(measuring ([0-9.]+) "
                      r"s, intervals ([0-9.]+) s\)", err)
    assert total, err
    assert float(total[2]) == pytest.approx(measured, abs=0.01)
    assert measured > 0.5 * float(total[1]), err  # the families are measured, not after
    assert "--workers" not in err  # no "--workers 2: using 1" when the user gave none
