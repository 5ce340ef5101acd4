"""A full disk must not block the recovery (#32 item 8): a disk that fills up during the final
evaluation stops `train` in one line naming the file, and once there is room `--resume auto`
finishes the run with no cleanup by hand (before: a prediction renamed into place but not
recorded was "not written by sodkit train", and train has no --force).

The disk is the one of tests/test_write_failures.py: a file size limit on the process
(``RLIMIT_FSIZE``, ``EFBIG`` through the code path of ``ENOSPC``). The run folder's record of
files is made nearly as long as the limit allows beforehand (entries of files long gone), so
that the first record line the final evaluation appends is the write that does not fit, while
every checkpoint (4.7 MB) does.
"""

from __future__ import annotations

import json
import logging

import pytest

from sodkit.cli import main
from sodkit.outputs import MARKER, RECORD
from tests.sod_fixtures import write_duts_layout
from tests.test_write_failures import DEMO, one_error_line, run_limited

LIMIT = 6_000_000  # bytes per file: above a checkpoint, below the padded record plus a line


@pytest.mark.slow
def test_a_full_disk_in_the_final_evaluation_resumes_without_cleanup(tmp_path, caplog):
    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=2)
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / MARKER).write_text(json.dumps({"kind": "train"}) + "\n")
    line = json.dumps(["gone/0000000.png", "0" * 64]) + "\n"
    count = (LIMIT - 40) // len(line)  # then no line of a prediction fits under the limit
    lines = [json.dumps([f"gone/{i:07d}.png", "0" * 64]) + "\n" for i in range(count)]
    (run / RECORD).write_text("".join(lines))
    args = ["train", str(DEMO), f"data_root={data}", f"output_root={tmp_path / 'runs'}",
            "name=r", "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
            "data.size=64", "data.batch_size=4", "data.num_workers=0",
            "model.backbone=test_resnet", "model.decoder_channels=8", "train.epochs=1",
            "eval.every=0"]

    line = one_error_line(run_limited(LIMIT, *args))
    assert "could not write" in line and str(run / "predictions") in line, line
    assert "File too large" in line and "--resume auto" in line, line
    assert (run / "checkpoints" / "last.pt").is_file()
    assert not list((run / "predictions").rglob("*.png"))  # none without its record

    # room again: no cleanup by hand; in this process (a fresh interpreter proves nothing here)
    with caplog.at_level(logging.INFO):
        assert main([*args, "--resume", "auto"]) == 0
    assert "resumed from" in caplog.text
    assert len(list((run / "predictions").rglob("*.png"))) == 2
    assert json.loads((run / "results.json").read_text())["DUTS-TE"]["MAE"] >= 0
