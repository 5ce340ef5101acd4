"""``configs/duts_minet_r50.yaml`` and ``configs/duts_f3net_r50.yaml`` are the published recipes:
their settings are the original code's, ``sodkit info`` on them reports the originals' size, and
each trains two steps (the recipe's own network, loss, optimizer, schedule and augmentation; only
the data, sizes and step count made small) and evaluates. MINet trains on ResNet-18 here: at
ResNet-50 its 162M parameters make each checkpoint 1.3 GB, a minute of this suite for nothing
the smaller backbone does not exercise (the full network is checked in test_zoo_fidelity)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import load_config

ROOT = Path(__file__).resolve().parents[1]
MINET = ROOT / "configs" / "duts_minet_r50.yaml"
F3NET = ROOT / "configs" / "duts_f3net_r50.yaml"

# (dotted key, value): the original code's settings (lartpang/MINet code/config.py and
# utils/*.py; weijun88/F3Net src/train.py and dataset.py), as the issue lists them
PUBLISHED = {
    MINET: {
        "model.name": "minet", "model.out_indices": "auto", "data.batch_size": 4,  # auto: 2-32
        "train.epochs": 50, "optim.name": "sgd", "optim.lr": 0.001, "optim.momentum": 0.9,
        "optim.weight_decay": 5e-4, "optim.backbone_lr_factor": 1.0, "optim.nesterov": False,
        "optim.lr_scaling": "none", "schedule.name": "poly", "schedule.power": 0.9,
        "schedule.interval": "epoch", "schedule.warmup_epochs": 0.0, "data.size": 320,
        "data.size_list": [], "data.binarize": 0.5, "data.hflip": 0.5, "data.rotation": 10.0,
        "data.color_jitter": 0.1, "data.crop": 0.0, "loss.aux_weight": 0.0,
        "loss.terms": {"bce": 1.0, "cel": {"weight": 1.0, "reduction": "batch"}},
        "runtime.precision": "fp32",
    },
    F3NET: {
        "model.name": "f3net", "model.out_indices": "auto", "data.batch_size": 32,  # auto: 4-32
        "train.epochs": 32, "optim.name": "sgd", "optim.lr": 0.05, "optim.momentum": 0.9,
        "optim.nesterov": True, "optim.weight_decay": 5e-4, "optim.decay_all": True,
        "optim.backbone_lr_factor": 0.1, "optim.lr_scaling": "none",
        "schedule.name": "triangular", "schedule.interval": "epoch",
        "schedule.warmup_epochs": 0.0, "data.size": 352,
        "data.size_list": [224, 256, 288, 320, 352], "data.crop": 0.125, "data.hflip": 0.5,
        "data.rotation": 0.0, "data.color_jitter": 0.0, "data.binarize": None,
        "model.freeze": ["backbone.stem"],  # ResNet: conv1, bn1 (below)
        "loss.terms": {"structure": {"weight": 1.0, "weighted_bce": False, "smooth": 1.0}},
        "loss.main_weight": 0.5, "loss.aux_weights": [0.0625, 0.125, 0.25, 0.5, 0.5],
        "loss.aux_upsample": True, "runtime.precision": "fp16",
    },
}


def _get(cfg: object, dotted: str) -> object:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


@pytest.mark.parametrize("recipe", [MINET, F3NET], ids=["minet", "f3net"])
def test_recipe_carries_the_published_settings(recipe: Path) -> None:
    cfg = load_config(recipe)
    for key, value in PUBLISHED[recipe].items():
        assert _get(cfg, key) == value, key
    assert cfg.model.backbone == "resnet50.tv_in1k"  # torchvision's ImageNet weights, as both
    f3 = load_config(F3NET).data
    assert [round(m * 255, 2) for m in f3.mean] == [124.55, 118.90, 102.94]
    assert [round(s * 255, 2) for s in f3.std] == [56.77, 55.97, 57.50]


@pytest.mark.slow  # builds each original network at full size
@pytest.mark.parametrize("recipe,params,gflops", [(MINET, 162.4e6, 173.7), (F3NET, 25.5e6, 32.7)],
                         ids=["minet", "f3net"])
def test_info_reports_the_original_size(recipe: Path, params: float, gflops: float,
                                        capsys) -> None:
    assert main(["info", str(recipe), "model.pretrained=null", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert abs(info["parameters"]["total"] / params - 1) <= 0.02
    assert abs(info["flops"] / 1e9 / gflops - 1) <= 0.04


@pytest.mark.slow
@pytest.mark.parametrize("recipe", [MINET, F3NET], ids=["minet", "f3net"])
def test_recipe_trains_two_steps_and_evaluates(recipe: Path, data_root: Path,
                                               tmp_path: Path) -> None:
    """On the session's small DUTS-layout set (6 test images), not the 800 + 150 image demo: the
    recipe's own parts are what is tested, and the demo's generation and presets have tests of
    their own (test_data_synthetic)."""
    overrides = [
        f"data_root={data_root}", f"output_root={tmp_path}", "name=r",
        "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
        "eval.metric_dataset=DUTS-TE", "data.size=64",
        "data.batch_size=2", "data.test_batch_size=3", "data.num_workers=0",
        "model.pretrained=null", "runtime.precision=fp32", "train.epochs=1",
        "train.steps_per_epoch=2",
        "train.log_every=1", "train.image_every=0", "eval.num_samples=2",
    ]
    if recipe == F3NET:
        overrides.append("data.size_list=[48,64]")
    else:
        overrides.append("model.backbone=resnet18")
    assert main(["train", str(recipe), *overrides]) == 0
    run = tmp_path / "r"
    results = json.loads((run / "results.json").read_text())
    assert 0.0 <= results["DUTS-TE"]["MAE"] <= 1.0
    test_images = list((data_root / "DUTS-TE" / "DUTS-TE-Image").iterdir())
    assert len(list((run / "predictions" / "DUTS-TE").glob("*.png"))) == len(test_images) == 6
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 2
    groups = state["optimizer"]["param_groups"]
    if recipe == F3NET:  # stem frozen; every group decayed; nesterov; backbone at 0.1x
        frozen = {"backbone.body.conv1.weight", "backbone.body.bn1.weight",
                  "backbone.body.bn1.bias"}
        trained = sum(len(g["params"]) for g in groups)
        assert trained == len(state["model"]) - len(frozen) - sum(
            k.endswith(("running_mean", "running_var", "num_batches_tracked"))
            for k in state["model"])
        assert {g["weight_decay"] for g in groups} == {5e-4}
        assert all(g["nesterov"] for g in groups)
        assert sorted({g["initial_lr"] for g in groups}) == pytest.approx([0.005, 0.05])
    else:  # one LR; no decay on biases and norms
        assert {g["initial_lr"] for g in groups} == {0.001}
        assert {g["weight_decay"] for g in groups} == {0.0, 5e-4}
