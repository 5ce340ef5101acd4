"""Nothing lost at the end of a run: each epoch's state is saved before its evaluation, a stop
at any moment of ``train`` exits 75 with a checkpoint that ``--resume auto`` finishes from
without training again, and a failure after training names its cause and keeps the state.

The signals are real SIGTERMs, sent by the process to itself at a chosen moment (the start of
an evaluation, of the result files, of the report), in the process that runs ``sodkit train``:
its real handlers, checkpoints and files. The finished runs are compared with the session's
uninterrupted run (``trained``: the same recipe, never stopped).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch

import sodkit.engine.trainer as trainer_module
import sodkit.report.html as report_module
from sodkit.cli import main
from sodkit.errors import EXIT_PREEMPTED
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "demo.yaml")


def train(data_root: Path, out: Path, *extra: str) -> int:
    return main(["train", CONFIG, *tiny_overrides(data_root, out, "r"), *extra])


def signal_at(monkeypatch, name: str, call: int) -> None:
    """SIGTERM this process as ``trainer.<name>`` (the report: the command's writer, which the
    trainer calls) is called for the ``call``-th time."""
    module = report_module if name == "write_run_report" else trainer_module
    original = getattr(module, name)
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)


def checkpoint(run: Path, name: str = "last.pt") -> dict:
    return torch.load(run / "checkpoints" / name, map_location="cpu", weights_only=True)


def trained_steps(records: list[logging.LogRecord]) -> list[str]:
    """The per-step training log lines of a run (each step logs: train.log_every=1)."""
    return [r.getMessage() for r in records if getattr(r, "progress", False)]


# Where each SIGTERM of the chain lands: (trainer function, its call in that process), the
# checkpoint it leaves (completed epochs, evaluated epochs) and the epochs that process trains.
CHAIN = [
    ("the epoch-1 evaluation (eval.every)", "evaluate", 1, (1, 0), 1),
    # the resumed process first runs the pending epoch-1 evaluation (call 1), then epoch 2
    ("the final evaluation", "evaluate", 2, (2, 1), 1),
    # after the final evaluation, its result files and the last save: the run completes, then
    # exits 75, and the resume has nothing left to do but the report
    ("the report", "write_run_report", 1, (2, 2), 0),
]


def test_sigterm_at_each_moment_after_training_exits_75_and_resume_ends_like_the_straight_run(
        data_root, trained, tmp_path, monkeypatch, caplog):
    """One run, stopped at each moment in turn and resumed each time (a chain costs one run's
    training): every stop exits 75 with the finished epoch on disk, no step is trained twice,
    and the last resume ends with the uninterrupted run's results, weights and best."""
    run = tmp_path / "r"
    resume: list[str] = []
    per_epoch = checkpoint(trained)["steps_per_epoch"]
    for moment, name, call, (epoch, evaluated), epochs_trained in CHAIN:
        caplog.clear()
        with monkeypatch.context() as patch, caplog.at_level(logging.INFO):
            signal_at(patch, name, call)
            code = train(data_root, tmp_path, "train.log_every=1", *resume)
        assert code == EXIT_PREEMPTED, moment
        saved = checkpoint(run)
        assert (saved["epoch"], saved["evaluated"], saved["epoch_step"]) == \
            (epoch, evaluated, 0), moment
        assert saved["step"] == epoch * per_epoch, moment
        assert len(trained_steps(caplog.records)) == epochs_trained * per_epoch, moment
        resume = ["--resume", "auto"]
    stale = run / "checkpoints" / ".step_00000099.pt.tmp-4194999"  # a killed writer's leftover
    stale.write_bytes(b"partial")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert train(data_root, tmp_path, "train.log_every=1", *resume) == 0
    assert trained_steps(caplog.records) == []
    assert not stale.exists()
    final = checkpoint(run)
    assert (final["epoch"], final["evaluated"]) == (2, 2)
    for key, value in checkpoint(trained)["model"].items():
        assert torch.equal(value, final["model"][key]), key
    assert final["best"] == checkpoint(trained)["best"]
    results = json.loads((run / "results.json").read_text())
    assert results == json.loads((trained / "results.json").read_text())
    assert (run / "report.html").is_file()


def test_the_report_describes_the_final_checkpoints(trained):
    """report.html is written after the last save: it lists best.pt and last.pt, and no step
    file that the pruning removed before the run ended."""
    page = (trained / "report.html").read_text()
    files = {p.name for p in (trained / "checkpoints").iterdir() if not p.name.startswith(".")}
    assert {"best.pt", "last.pt"} <= files
    for name in files:
        assert name in page, name
    for number in range(1, checkpoint(trained)["step"]):
        name = f"step_{number:08d}.pt"
        assert (name in page) == (name in files), name


def test_a_failure_in_the_final_evaluation_names_it_and_keeps_the_trained_state(
        data_root, tmp_path, monkeypatch, capsys, caplog):
    """A test file damaged during training: the error names the file and the checkpoint, the
    state is on disk, and once the file is back, --resume auto evaluates without training."""
    copy = tmp_path / "data"
    subprocess.run(["cp", "-r", str(data_root), str(copy)], check=True)
    gt = sorted((copy / "DUTS-TE" / "DUTS-TE-Mask").iterdir())[0]
    good = gt.read_bytes()
    original = trainer_module.evaluate

    def damage_then_evaluate(*args, **kwargs):
        gt.write_bytes(good[:40])
        return original(*args, **kwargs)

    one_epoch = ["train.epochs=1", "eval.every=0", "train.log_every=1"]
    with monkeypatch.context() as patch:
        patch.setattr(trainer_module, "evaluate", damage_then_evaluate)
        assert train(copy, tmp_path, *one_epoch) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert gt.name in message and "Training is not lost" in message, message
    assert "checkpoints/last.pt (epoch 1/1 step 4/4)" in message, message
    assert checkpoint(tmp_path / "r")["evaluated"] == 0
    gt.write_bytes(good)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert train(copy, tmp_path, *one_epoch, "--resume", "auto") == 0
    assert trained_steps(caplog.records) == []
    assert checkpoint(tmp_path / "r")["evaluated"] == 1
    assert json.loads((tmp_path / "r" / "results.json").read_text())["DUTS-TE"]["MAE"] >= 0


def test_a_test_stem_that_cannot_name_a_prediction_is_refused_before_training(
        data_root, tmp_path, capsys):
    copy = tmp_path / "data"
    subprocess.run(["cp", "-r", str(data_root), str(copy)], check=True)
    for sub in ("DUTS-TE-Image", "DUTS-TE-Mask"):
        first = sorted((copy / "DUTS-TE" / sub).iterdir())[0]
        first.rename(first.with_name(f"a\tb{first.suffix}"))
    assert train(copy, tmp_path / "out") == 2
    assert "cannot name a prediction file" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before any work: nothing written
    assert main(["check-data", CONFIG, f"data_root={copy}", "data.train=[{preset: duts-tr}]",
                 "data.test=[{preset: duts-te}]"]) == 1
    assert "cannot name a prediction file" in capsys.readouterr().out


def test_a_config_error_found_while_building_leaves_no_run_folder(data_root, tmp_path):
    assert train(data_root, tmp_path, "model.out_indices=[7]") == 2
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("label", ["$x^$", "cost $\\foo$", "a$_$b"])
def test_names_in_plot_labels_are_drawn_as_text(label, tmp_path):
    """Each would be a mathtext syntax error (the figure, and before the fix the run's final
    evaluation, failing) if its ``$`` were not escaped."""
    from sodkit.report.tables import plot_curves

    curve = {"precision_curve": [1.0] * 256, "recall_curve": [0.5] * 256, "fm_curve": [0.5] * 256}
    plot_curves({label: curve}, tmp_path)
    assert (tmp_path / "pr.png").stat().st_size > 0 and (tmp_path / "fm.png").stat().st_size > 0


def test_resuming_a_checkpoint_of_another_width_is_one_line_and_writes_nothing(
        data_root, trained, capsys):
    """The resumed state is loaded before the run folder is touched: a checkpoint that does not
    fit the configured network is one line naming the differing key, and the run folder (the
    session's finished run) keeps every byte."""
    import hashlib

    def tree() -> dict[str, str]:
        return {str(p.relative_to(trained)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(trained.rglob("*")) if p.is_file()}

    before = tree()
    args = [*tiny_overrides(data_root, trained.parent, trained.name), "model.decoder_channels=32"]
    assert main(["train", CONFIG, *args, "--resume", "auto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.decoder_channels 16 -> 32" in err[0], err
    assert tree() == before
