"""NaN never becomes a black mask: weights with NaN or infinity, a NaN in a checkpoint's stored
config and a network that predicts NaN are errors naming the cause, before a mask is written
(``predict`` used to write all-black masks and exit 0)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def altered(trained: Path, tmp_path: Path, change) -> Path:
    """A copy of the trained run's last checkpoint, changed by ``change(state)``."""
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    change(state)
    path = tmp_path / "altered.pt"
    torch.save(state, path)
    return path


def nan_weight(state: dict) -> None:
    state["model"]["backbone.body.conv1.0.weight"][0, 0, 0, 0] = float("nan")


def nan_std(state: dict) -> None:
    state["config"]["data"]["std"] = [float("nan"), 0.224, 0.225]


def negative_variance(state: dict) -> None:
    """Finite weights whose forward is NaN (BatchNorm takes the square root of the variance)."""
    state["model"]["backbone.body.conv1.1.running_var"].fill_(-1.0)


@pytest.fixture
def images(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        cv2.imwrite(str(folder / f"im{i}.jpg"), rng.integers(0, 256, (40, 50, 3), np.uint8))
    return folder


@pytest.mark.parametrize(("change", "said"), [
    (nan_weight, "the model weights hold NaN or infinite values (1 tensors, e.g. "
                 "backbone.body.conv1.0.weight)"),
    (nan_std, "the config stored in it is invalid: data.std.0: must be a finite "
              "number"),
    (negative_variance, "the network predicted NaN or infinite values for im0.jpg")])
def test_predict_refuses_to_write_nan_as_black_masks(trained, tmp_path, images, capsys,
                                                     change, said):
    checkpoint = altered(trained, tmp_path, change)
    code = main(["predict", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "masks"),
                 "--workers", "0", str(images)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and said in err[0], err
    assert not list(tmp_path.glob("masks/*.png"))


def test_test_and_export_refuse_nan_weights(trained, data_root, tmp_path, capsys):
    checkpoint = altered(trained, tmp_path, nan_weight)
    overrides = tiny_overrides(data_root, tmp_path / "runs", "t")
    assert main(["test", DEMO, *overrides, "--checkpoint", str(checkpoint)]) == 2
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx",
                 str(tmp_path / "m.onnx")]) == 2
    err = capsys.readouterr().err
    assert err.count("weights hold NaN or infinite values") == 2, err
    assert not (tmp_path / "m.onnx").exists() and not list(tmp_path.rglob("*.png"))


def test_sodkit_test_refuses_a_network_that_predicts_nan(trained, data_root, tmp_path, capsys):
    checkpoint = altered(trained, tmp_path, negative_variance)
    overrides = tiny_overrides(data_root, tmp_path / "runs", "t")
    assert main(["test", DEMO, *overrides, "--checkpoint", str(checkpoint)]) == 2
    assert "the network predicted NaN or infinite values for sun_te_000" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.png")) and not list(tmp_path.rglob("results.json"))
