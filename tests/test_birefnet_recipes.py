"""``configs/dis5k_birefnet_swinl.yaml``, ``configs/general_birefnet_swinl.yaml`` (issue 24,
item 2) and ``configs/matting_birefnet_swinl.yaml`` (issue 38, item 3): their settings are the
original code's (ZhengPeng7/BiRefNet config.py, train.py, train.sh, loss.py, image_proc.py),
and each builds, trains two steps and evaluates with the recipe's own loss (pixel terms, side
outputs, gradient reference, last-epochs schedule), optimizer, schedule and augmentation; only
the data, the size, the step count and the backbone (PVTv2-b0 for Swin-L, from scratch) are
made small."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config import load_config
from sodkit.config.schema import LossPhaseCfg

ROOT = Path(__file__).resolve().parents[1]
DIS5K = ROOT / "configs" / "dis5k_birefnet_swinl.yaml"
GENERAL = ROOT / "configs" / "general_birefnet_swinl.yaml"
MATTING = ROOT / "configs" / "matting_birefnet_swinl.yaml"

COMMON = {  # both tasks: config.py, train.py, image_proc.py
    "model.name": "birefnet", "model.backbone": "swin_large_patch4_window12_384.ms_in22k_ft_in1k",
    "model.backbone_kwargs": {"drop_path_rate": 0.2}, "data.size": 1024, "data.size_list": [],
    "data.size_range": [], "data.batch_size": 8, "data.hflip": 0.5,
    "data.rotation": 15.0, "data.rotation_p": 0.2, "data.color_enhance": True,
    "data.pepper": 0.0015, "data.crop": 0.0, "data.color_jitter": 0.0, "data.binarize": None,
    "loss.aux_weight": 1.0, "loss.aux_upsample": True, "loss.aux_align_corners": True,
    "loss.gradient_weight": 1.0, "optim.name": "adamw", "optim.lr_scaling": "sqrt",
    "optim.base_batch_size": 4, "optim.weight_decay": 0.01, "optim.decay_all": True,
    "optim.backbone_lr_factor": 1.0, "schedule.name": "step", "schedule.milestones": [1e5],
    "schedule.gamma": 0.5, "schedule.interval": "epoch", "runtime.precision": "bf16",
    "runtime.seed": 7,
}
PUBLISHED = {
    DIS5K: {"optim.lr": 1e-4, "train.epochs": 500,
            "loss.terms": {"bce": 30.0, "iou": {"weight": 0.5, "reduction": "sum"}, "ssim": 5.0},
            "loss.schedule": [LossPhaseCfg(from_epoch=-40, per_epoch=True,
                                           scale={"bce": 0.0, "ssim": 1.0, "iou": 0.5})]},
    GENERAL: {"optim.lr": 1e-5, "train.epochs": 200,
              "loss.terms": {"bce": 30.0, "iou": {"weight": 0.5, "reduction": "sum"},
                             "ssim": 5.0, "mae": 100.0},
              "loss.schedule": [LossPhaseCfg(from_epoch=-20, per_epoch=True, scale={
                  "bce": 0.0, "ssim": 1.0, "iou": 0.5, "mae": 0.9})]},
    MATTING: {"optim.lr": 1e-5, "train.epochs": 150,  # config.py:123-135, train.py:213-217
              "loss.terms": {"bce": 30.0, "mae": 100.0, "ssim": 5.0},
              "loss.schedule": [LossPhaseCfg(from_epoch=-10, per_epoch=True,
                                             scale={"mae": 1.0, "ssim": 0.9})],
              "eval.compute": ["matting"]},
}
TESTS = {DIS5K: ["dis-vd", "dis-te1", "dis-te2", "dis-te3", "dis-te4"], GENERAL: ["dis-vd"],
         MATTING: ["p3m-500-np", "am-2k-te"]}


def _get(cfg: object, dotted: str) -> object:
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


@pytest.mark.parametrize("recipe", [DIS5K, GENERAL, MATTING], ids=["dis5k", "general", "matting"])
def test_recipe_carries_the_original_settings(recipe: Path) -> None:
    cfg = load_config(recipe)
    for key, value in {**COMMON, **PUBLISHED[recipe]}.items():
        assert _get(cfg, key) == value, key
    assert [d.preset for d in cfg.data.test] == TESTS[recipe]
    assert cfg.eval.metric_dataset == ("P3M-500-NP" if recipe == MATTING else "DIS-VD")


@pytest.mark.slow
@pytest.mark.parametrize("recipe", [DIS5K, GENERAL], ids=["dis5k", "general"])
def test_recipe_trains_two_steps_and_evaluates(recipe: Path, data_root: Path,
                                               tmp_path: Path) -> None:
    """PVTv2-b0 at 64 px (the General run on non-square batches, 64 x 96 and 96 x 64, with EMA
    and flip TTA) in bf16 on the session's DUTS-layout set: the gradient reference is trained,
    the last-epochs schedule covers the whole (1-epoch) run and says so once, and the test set
    is evaluated."""
    overrides = [
        f"data_root={data_root}", f"output_root={tmp_path}", "name=r",
        "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
        "eval.metric_dataset=DUTS-TE", "data.size=64", "data.batch_size=2",
        "data.test_batch_size=3", "data.num_workers=0", "model.backbone=pvt_v2_b0",
        "model.pretrained=null", "train.epochs=1", "train.steps_per_epoch=2",
        "train.log_every=1", "train.image_every=0", "eval.num_samples=2",
    ]
    if recipe == GENERAL:  # with EMA and flip TTA (issue 24 item 6)
        overrides += ["data.size_list=[[64, 96], [96, 64]]", "train.ema_decay=0.9",
                      "eval.tta=[hflip]"]
    assert main(["train", str(recipe), *overrides]) == 0
    run = tmp_path / "r"
    results = json.loads((run / "results.json").read_text())
    assert 0.0 <= results["DUTS-TE"]["MAE"] <= 1.0
    if recipe == DIS5K:  # eval.compute: DIS5K's HCE, boundary IoU and boundary accuracy
        assert results["DUTS-TE"]["HCE"] >= 0
        assert 0.0 <= results["DUTS-TE"]["maxBIoU"] <= 1.0
        assert "mBA" in results["DUTS-TE"]
    assert len(list((run / "predictions" / "DUTS-TE").glob("*.png"))) == 6
    log = (run / "train.log").read_text()
    assert log.count("loss.schedule.0 from epoch 1") == 1  # -40 / -20 of a 1-epoch run
    assert "bce 0," in log and " gradient " in log  # bce off; the gradient loss logged
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 2
    assert (state.get("ema") is not None) == (recipe == GENERAL)
    groups = state["optimizer"]["param_groups"]
    assert {g["weight_decay"] for g in groups} == {0.01}  # decay_all, one learning rate
    lr = 1e-4 if recipe == DIS5K else 1e-5
    assert [g["initial_lr"] for g in groups] == pytest.approx([lr * (2 / 4) ** 0.5] * 2)
    trained = {n for n, _ in state["model"].items() if n.startswith("gradient.")}
    assert any(".pred." in n for n in trained)


def test_deformable_convolution_runs_under_bf16_autocast() -> None:
    """torchvision's deform_conv2d has no bf16 kernel (and no CPU autocast wrapper): under the
    recipes' bf16 it runs in float32 and returns the input's dtype, as torchvision's CUDA
    autocast wrapper does."""
    from sodkit.module.aspp import DeformConv2d

    torch.manual_seed(0)
    conv = DeformConv2d(4, 3, 3)
    torch.nn.init.normal_(conv.offset.weight, std=0.1)
    x = torch.randn(1, 4, 8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv(x.bfloat16())
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), conv(x.bfloat16().float()), atol=0.05, rtol=0.02)


def _p3m_layout(root: Path) -> None:
    """A tiny P3M-10k release: train/blurred_image + train/mask, and P3M-500-NP's
    original_image, mask and trimap (soft-edged discs, 96 px)."""
    from tests.matting_oracle import trimap_of

    folders = {"train": ("train/blurred_image", "train/mask", None, 6),
               "test": ("validation/P3M-500-NP/original_image", "validation/P3M-500-NP/mask",
                        "validation/P3M-500-NP/trimap", 3)}
    rng = np.random.default_rng(0)
    y, x = np.mgrid[:96, :96]
    for images, masks, trimaps, count in folders.values():
        for folder in (images, masks, trimaps):
            if folder:
                (root / "P3M-10k" / folder).mkdir(parents=True)
        for i in range(count):
            alpha = np.clip((30 - np.hypot(y - 48, x - rng.uniform(40, 56))) / 8, 0, 1)
            image = (alpha[..., None] * rng.uniform(150, 255, 3)).astype(np.uint8)
            matte = np.round(alpha * 255).astype(np.uint8)
            cv2.imwrite(str(root / "P3M-10k" / images / f"p{i}.jpg"), image)
            cv2.imwrite(str(root / "P3M-10k" / masks / f"p{i}.png"), matte)
            if trimaps:
                cv2.imwrite(str(root / "P3M-10k" / trimaps / f"p{i}.png"), trimap_of(matte))


@pytest.mark.slow
def test_matting_recipe_trains_two_steps_and_evaluates_the_matting_metrics(tmp_path: Path
                                                                          ) -> None:
    """PVTv2-b0 at 64 px in bf16 on a tiny P3M-10k layout found by the presets (its trimaps
    too): the matting metrics over P3M-500-NP's trimaps in results.json and per image."""
    _p3m_layout(tmp_path / "data")
    overrides = [
        f"data_root={tmp_path / 'data'}", f"output_root={tmp_path}", "name=m",
        "data.train=[{preset: p3m-10k}]", "data.test=[{preset: p3m-500-np}]",
        "data.size=64", "data.batch_size=3", "data.test_batch_size=3", "data.num_workers=0",
        "model.backbone=pvt_v2_b0", "model.pretrained=null", "train.epochs=1",
        "train.steps_per_epoch=2", "train.log_every=1", "train.image_every=0",
        "eval.num_samples=0",
    ]
    assert main(["train", str(MATTING), *overrides]) == 0
    run = tmp_path / "m"
    results = json.loads((run / "results.json").read_text())["P3M-500-NP"]
    for key in ("SAD", "MattingMSE", "MAD", "Grad", "Conn"):
        assert np.isfinite(results[key]) and results[key] >= 0, key
    rows = (run / "results_per_image.csv").read_text().splitlines()
    assert "SAD" in rows[0] and len(rows) == 4
    log = (run / "train.log").read_text()
    assert "masks: soft (alpha mattes)" in log and "loss.schedule.0 from epoch 1" in log
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 2
