"""End to end: train on a DUTS-layout folder, then test, evaluate the PNGs and resume.

One short training run (module fixture) is shared by the tests that read its run folder; the
resume test trains its own runs because it compares them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from sodkit.cli import main
from sodkit.imageio import read_mask
from tests import processes
from tests.sod_fixtures import TINY_BACKBONE, tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
METRICS = ["MAE", "Smeasure", "wFmeasure", "maxFm", "meanFm", "adpFm", "maxEm", "meanEm", "adpEm"]



def test_run_folder_is_complete(trained, data_root):
    for name in ["config.yaml", "train.log", "checkpoints/last.pt", "checkpoints/best.pt",
                 "results.json", "results.md", "results.csv", "samples.png",
                 "curves/pr.png", "curves/fm.png"]:
        assert (trained / name).is_file(), name
    saved = yaml.safe_load((trained / "config.yaml").read_text())
    assert saved["train"]["epochs"] == 2 and saved["model"]["backbone"] == TINY_BACKBONE
    log = (trained / "train.log").read_text()
    assert "epoch 2/2" in log and ("img/s" in log or "s/img" in log)


def test_predictions_cover_every_test_image_at_gt_size(trained, data_root):
    gt_dir = data_root / "DUTS-TE" / "DUTS-TE-Mask"
    preds = sorted((trained / "predictions" / "DUTS-TE").glob("*.png"))
    assert [p.stem for p in preds] == sorted(p.stem for p in gt_dir.glob("*.png"))
    for pred in preds:
        assert read_mask(pred).shape == read_mask(gt_dir / pred.name).shape


def test_results_hold_every_metric(trained):
    results = json.loads((trained / "results.json").read_text())
    assert list(results) == ["DUTS-TE"]
    values = results["DUTS-TE"]
    for key in METRICS:
        assert 0.0 <= values[key] <= 1.0, key
    assert "DUTS-TE" in (trained / "results.md").read_text()


def test_checkpoint_holds_the_training_state(trained):
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)  # plain types only
    for key in ["model", "optimizer", "scheduler", "scaler", "epoch", "step", "config", "rng"]:
        assert key in state
    assert state["world_size"] == 1 and len(state["rng"]) == 1
    assert state["epoch"] == 2
    assert state["step"] == 2 * 4  # 16 images / batch 4 = 4 steps per epoch
    assert state["best"]["metric"] == "maxFm"


def test_tensorboard_event_file_has_scalars_and_images(trained):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list((trained / "tb").glob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(trained / "tb"), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    tags = acc.Tags()
    for tag in ["loss/loss", "loss/bce", "perf/images_per_sec", "eval/DUTS-TE/maxFm"]:
        assert tag in tags["scalars"], tag
    assert any(t.startswith("lr/") for t in tags["scalars"])
    assert "train/image_gt_pred" in tags["images"]
    assert [e.step for e in acc.Scalars("loss/loss")][-1] == 8


def test_sodkit_test_reproduces_results_exactly(trained, data_root):
    out = trained.parent
    overrides = tiny_overrides(data_root, out, "t_test")
    # the README's synopsis: overrides may follow the options
    code = main(["test", str(ROOT / "configs" / "demo.yaml"), *overrides[:-1],
                 "--checkpoint", str(trained / "checkpoints" / "last.pt"), overrides[-1]])
    assert code == 0
    again = json.loads((out / "t_test" / "eval" / "last" / "results.json").read_text())
    assert again == json.loads((trained / "results.json").read_text())


def test_saved_pngs_give_the_same_numbers_with_pysodmetrics(trained, data_root):
    import py_sod_metrics as psm

    classes = {"MAE": psm.MAE(), "S": psm.Smeasure(), "wF": psm.WeightedFmeasure(),
               "F": psm.Fmeasure(), "E": psm.Emeasure()}
    gt_dir = data_root / "DUTS-TE" / "DUTS-TE-Mask"
    for pred_path in sorted((trained / "predictions" / "DUTS-TE").glob("*.png")):
        pred, gt = read_mask(pred_path), read_mask(gt_dir / pred_path.name)
        for metric in classes.values():
            metric.step(pred=pred, gt=gt)
    ref = {k: m.get_results() for k, m in classes.items()}
    expected = {
        "MAE": ref["MAE"]["mae"], "Smeasure": ref["S"]["sm"], "wFmeasure": ref["wF"]["wfm"],
        "maxFm": ref["F"]["fm"]["curve"].max(), "meanFm": ref["F"]["fm"]["curve"].mean(),
        "adpFm": ref["F"]["fm"]["adp"], "maxEm": ref["E"]["em"]["curve"].max(),
        "meanEm": ref["E"]["em"]["curve"].mean(), "adpEm": ref["E"]["em"]["adp"],
    }
    ours = json.loads((trained / "results.json").read_text())["DUTS-TE"]
    for key, value in expected.items():
        assert ours[key] == pytest.approx(float(value), abs=1e-6), key


@pytest.mark.slow
def test_resume_continues_from_the_saved_step_and_matches(data_root, tmp_path):
    """Resuming from the epoch-1 state ends with the weights of the uninterrupted run."""
    cfg = str(ROOT / "configs" / "demo.yaml")
    common = ["eval.every=0", "data.test=[]", "train.keep_every=1", "data.size_list=[64,96]",
              "model.backbone=test_resnet"]  # 0.38M parameters: the resume is the engine's
    straight = tiny_overrides(data_root, tmp_path, "straight") + common
    assert main(["train", cfg, *straight]) == 0
    snapshot = tmp_path / "straight" / "checkpoints" / "epoch_0001.pt"
    one = torch.load(snapshot, weights_only=True)
    assert (one["epoch"], one["step"]) == (1, 4)
    resumed = tiny_overrides(data_root, tmp_path, "resumed") + common
    assert main(["train", cfg, *resumed, "--resume", str(snapshot)]) == 0
    a = torch.load(tmp_path / "straight/checkpoints/last.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed/checkpoints/last.pt", weights_only=True)
    assert (b["epoch"], b["step"]) == (2, 8)
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    log = (tmp_path / "resumed" / "train.log").read_text()
    assert "resumed from" in log and "step 1/8" not in log


def test_existing_run_folder_needs_resume_or_overwrite(trained, data_root, capsys):
    overrides = tiny_overrides(data_root, trained.parent, "t")
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 2
    assert "--resume auto" in capsys.readouterr().err


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return processes.run([sys.executable, "-m", "sodkit", *args], cwd=ROOT)


def test_mistyped_key_exits_2_naming_the_right_key():
    proc = run_cli("train", "configs/demo.yaml", "train.epoch=3")
    assert proc.returncode == 2
    assert "train.epochs" in proc.stderr


def test_missing_dataset_folder_names_the_path(tmp_path, capsys):
    missing = tmp_path / "no-such-duts"
    code = main(["train", str(ROOT / "configs" / "demo.yaml"), f"data_root={missing}",
                 f"output_root={tmp_path}", "data.train=[{preset: duts-tr}]"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(missing / "DUTS-TR") in err
    assert "Traceback" not in err


def test_predict_handles_modes_and_sizes(trained, tmp_path):
    import cv2
    from PIL import Image

    rng = np.random.default_rng(1)
    inputs = tmp_path / "in"
    inputs.mkdir()
    rgb = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(inputs / "rgb.jpg")
    Image.fromarray(rgb[:, :, 0]).save(inputs / "grey.png")
    Image.fromarray(rng.integers(0, 256, (33, 41, 4), dtype=np.uint8), "RGBA").save(
        inputs / "rgba.png")
    cv2.imwrite(str(inputs / "deep.png"), rng.integers(0, 65536, (80, 45), dtype=np.uint16))
    Image.fromarray(rgb).convert("P").save(tmp_path / "palette.png")
    out = tmp_path / "out"
    code = main(["predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                 "--out", str(out), "--workers", "0", str(inputs), str(tmp_path / "palette.png")])
    assert code == 0
    expected = {"rgb": (50, 70), "grey": (50, 70), "rgba": (33, 41), "deep": (80, 45),
                "palette": (50, 70)}
    for stem, shape in expected.items():
        mask = read_mask(out / f"{stem}.png")
        assert mask.shape == shape and mask.dtype == np.uint8, stem


@pytest.mark.parametrize(
    ("override", "needle"),
    [("eval.metric=maxF", "did you mean 'maxFm'"), ("eval.metric_dataset=DUTS", "'DUTS-TE'")],
)
def test_bad_checkpoint_selection_fails_before_training(data_root, tmp_path, capsys, override,
                                                         needle):
    overrides = tiny_overrides(data_root, tmp_path, "bad") + [override]
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 2
    assert needle in capsys.readouterr().err
    assert not (tmp_path / "bad" / "checkpoints").exists()
