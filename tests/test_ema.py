"""EMA of the weights: the update rule, resume round trip, and which weights test/predict use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from sodkit.checkpoint_weights import pick_weights
from sodkit.cli import main
from sodkit.engine.ema import EMA
from sodkit.errors import UserError
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]


def test_update_rule_with_warm_up_and_buffers() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    ema = EMA(model, decay=0.99)
    start = {k: v.clone() for k, v in ema.module.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.train()(torch.randn(4, 2))  # BatchNorm statistics and counter change
    ema.update(model)
    d = min(0.99, 1 / 10)  # first update: the warm-up decay
    for key, value in ema.module.state_dict().items():
        new = model.state_dict()[key]
        if value.is_floating_point():
            torch.testing.assert_close(value, d * start[key] + (1 - d) * new)
        else:
            assert torch.equal(value, new)
    assert ema.updates == 1 and ema.current_decay() == pytest.approx(2 / 11)
    assert not any(p.requires_grad for p in ema.module.parameters())


@pytest.mark.slow
def test_resume_round_trips_the_average(data_root, tmp_path) -> None:
    cfg = str(ROOT / "configs" / "demo.yaml")
    common = ["eval.every=0", "data.test=[]", "train.keep_every=1", "train.ema_decay=0.9",
              "model.backbone=test_resnet"]  # 0.38M parameters: the resume is the engine's
    straight = tiny_overrides(data_root, tmp_path, "straight") + common
    assert main(["train", cfg, *straight]) == 0
    snapshot = tmp_path / "straight" / "checkpoints" / "epoch_0001.pt"
    assert torch.load(snapshot, weights_only=True)["ema"]["updates"] == 4
    resumed = tiny_overrides(data_root, tmp_path, "resumed") + common
    assert main(["train", cfg, *resumed, "--resume", str(snapshot)]) == 0
    a = torch.load(tmp_path / "straight/checkpoints/last.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed/checkpoints/last.pt", weights_only=True)
    assert a["ema"]["updates"] == b["ema"]["updates"] == 8
    for key, value in a["ema"]["model"].items():
        assert torch.equal(value, b["ema"]["model"][key]), key
    differs = [k for k, v in a["model"].items() if not torch.equal(v, a["ema"]["model"][k])]
    assert differs  # the average is not the trained weights
    assert pick_weights(a, "auto", Path("x"))[0] == "ema"
    assert pick_weights(a, "model", Path("x"))[0] == "model"


def test_ema_weights_asked_of_a_checkpoint_without_them() -> None:
    state = {"model": {}, "ema": None}
    assert pick_weights(state, "auto", Path("c.pt"))[0] == "model"
    with pytest.raises(UserError, match="has no EMA weights .*--weights model"):
        pick_weights(state, "ema", Path("c.pt"))


def test_ema_decay_is_checked() -> None:
    from sodkit.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="train.ema_decay"):
        load_config(ROOT / "configs" / "demo.yaml", ["train.ema_decay=1.5"])


@pytest.mark.slow
def test_training_with_ema_evaluates_the_average_and_test_uses_it(data_root, tmp_path) -> None:
    cfg = str(ROOT / "configs" / "demo.yaml")
    overrides = tiny_overrides(data_root, tmp_path, "ema", epochs=1) + ["train.ema_decay=0.5"]
    assert main(["train", cfg, *overrides]) == 0
    run = tmp_path / "ema"
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=True)
    assert best["ema"]["updates"] == 4
    assert main(["test", cfg, *overrides, "--checkpoint", str(run / "checkpoints/best.pt"),
                 "--out", str(tmp_path / "t_ema")]) == 0
    assert "ema weights" in (tmp_path / "t_ema" / "test.log").read_text()
    # the average's evaluation equals the training run's own final one
    trained = json.loads((run / "results.json").read_text())
    tested = json.loads((tmp_path / "t_ema" / "results.json").read_text())
    assert trained["DUTS-TE"]["MAE"] == pytest.approx(tested["DUTS-TE"]["MAE"], abs=1e-9)
