"""BiRefNet's losses (issue 24, item 2): the ``mae`` term, IoU summed over the batch, the
gradient reference supervision and the term weights scheduled by epoch (``loss.schedule``),
each against a hand computation or the original code's definition (loss.py, train.py)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from sodkit.config import ConfigError, LossCfg, load_config
from sodkit.config.schema import LossPhaseCfg
from sodkit.loss import build_criterion, iou_loss, mae_loss
from sodkit.loss.gradient import gradient_reference_loss

GENERAL = Path(__file__).resolve().parents[1] / "configs" / "general_birefnet_swinl.yaml"


def test_mae_by_hand() -> None:
    mask = torch.zeros(2, 1, 4, 4)
    mask[..., :2] = 1.0
    logits = torch.full_like(mask, math.log(3.0))  # p = 0.75 everywhere
    # half the pixels are 1 (error 0.25), half 0 (error 0.75)
    assert mae_loss(logits, mask).item() == pytest.approx(0.5)
    logits[..., :2] = math.log(3.0)
    logits[..., 2:] = -math.log(3.0)  # p = 0.25 where the mask is 0
    assert mae_loss(logits, mask).item() == pytest.approx(0.25)


def test_iou_summed_over_the_batch() -> None:
    """BiRefNet's IoULoss returns the sum of the per-image losses (not the mean)."""
    mask = torch.zeros(2, 1, 8, 8)
    mask[..., :4] = 1.0
    perfect = 30.0 * (2 * mask[0] - 1)
    logits = torch.stack([perfect, -perfect])  # image 0 right (0), image 1 disjoint (1)
    assert iou_loss(logits, mask).item() == pytest.approx(0.5, abs=1e-6)
    assert iou_loss(logits, mask, reduction="sum").item() == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(ConfigError, match=r"loss\.terms\.iou: bad parameters"):
        build_criterion(LossCfg(terms={"iou": {"weight": 1, "reduction": "max"}}))


def _original_pixel_loss(logits: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """BiRefNet's PixLoss for the General task, written from its loss.py: BCELoss x30, IoULoss
    (sum over the batch) x0.5, SSIMLoss (``1 - (1 + ssim) / 2``, 11x11 Gaussian, sigma 1.5) x10
    and L1Loss x100, all on sigmoid probabilities."""
    p = logits.sigmoid()
    bce = F.binary_cross_entropy(p, gt)
    inter = (p * gt).flatten(1).sum(1)
    iou = (1 - inter / (gt.flatten(1).sum(1) + p.flatten(1).sum(1) - inter)).sum()
    x = torch.arange(11, dtype=torch.float32) - 5
    g = torch.exp(-(x**2) / (2 * 1.5**2))
    g = g / g.sum()
    window = torch.outer(g, g)[None, None]

    def blur(t: torch.Tensor) -> torch.Tensor:
        return F.conv2d(t, window, padding=5)

    mu1, mu2 = blur(p), blur(gt)
    s1, s2, s12 = blur(p * p) - mu1**2, blur(gt * gt) - mu2**2, blur(p * gt) - mu1 * mu2
    c1, c2 = 0.01**2, 0.03**2
    ssim = ((2 * mu1 * mu2 + c1) * (2 * s12 + c2)) / ((mu1**2 + mu2**2 + c1) * (s1 + s2 + c2))
    ssim_loss = 1 - (1 + ssim.mean()) / 2
    mae = (p - gt).abs().mean()
    return 30 * bce + 0.5 * iou + 10 * ssim_loss + 100 * mae


def _pixel_criterion() -> object:
    """The General recipe's criterion without its gradient part (tested on its own below)."""
    cfg = load_config(GENERAL)
    assert cfg.loss.gradient_weight == 1.0  # train.py:199 loss_gdt * 1.0
    return build_criterion(dataclasses.replace(cfg.loss, gradient_weight=0.0))


def test_general_recipe_terms_are_the_original_pixel_loss() -> None:
    """configs/general_birefnet_swinl.yaml's loss.terms give the original's weighted sum (its
    SSIM weight 10 on ``(1 - SSIM) / 2`` is our 5 on ``1 - SSIM``)."""
    criterion = _pixel_criterion()
    torch.manual_seed(0)
    gt = (torch.rand(3, 1, 32, 32) > 0.6).float()
    logits = torch.randn(3, 1, 32, 32) * 3
    total, _ = criterion({"logits": logits, "aux": []}, gt)
    torch.testing.assert_close(total, _original_pixel_loss(logits, gt), rtol=1e-5, atol=1e-5)


def test_side_outputs_upsampled_with_aligned_corners() -> None:
    """ms_supervision: each side's logits resized to the mask (bilinear, align_corners=True,
    as PixLoss) and weighted as the main output."""
    criterion = _pixel_criterion()
    torch.manual_seed(1)
    gt = (torch.rand(2, 1, 32, 32) > 0.5).float()
    logits, side = torch.randn(2, 1, 32, 32), torch.randn(2, 1, 8, 8)
    total, _ = criterion({"logits": logits, "aux": [side]}, gt)
    up = F.interpolate(side, size=(32, 32), mode="bilinear", align_corners=True)
    expected = _original_pixel_loss(logits, gt) + _original_pixel_loss(up, gt)
    torch.testing.assert_close(total, expected, rtol=1e-5, atol=1e-5)


def test_gradient_reference_loss_as_train_py() -> None:
    """Sum over levels of BCELoss(sigmoid(upsampled prediction), sigmoid(target)); the target's
    own gradient flows (the original does not detach it)."""
    torch.manual_seed(2)
    preds = [torch.randn(2, 1, 4, 4), torch.randn(2, 1, 8, 8)]
    targets = [torch.randn(2, 1, 16, 16, requires_grad=True) for _ in preds]
    value = gradient_reference_loss(preds, targets)
    expected = sum(F.binary_cross_entropy(
        F.interpolate(p, size=(16, 16), mode="bilinear", align_corners=True).sigmoid(),
        t.sigmoid()) for p, t in zip(preds, targets, strict=True))
    torch.testing.assert_close(value, expected)
    value.backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in targets)


def test_gradient_weight_needs_gradient_outputs() -> None:
    net = torch.nn.Linear(1, 1)
    with pytest.raises(ConfigError, match=r"^loss\.gradient_weight: .*birefnet"):
        build_criterion(LossCfg(gradient_weight=1.0), net)
    criterion = build_criterion(LossCfg(gradient_weight=2.0))
    mask = torch.ones(1, 1, 4, 4)
    grads = [torch.zeros(1, 1, 2, 2)]
    total, parts = criterion({"logits": torch.zeros(1, 1, 4, 4), "aux": [], "gradient": grads,
                              "gradient_target": [torch.zeros(1, 1, 4, 4)]}, mask)
    # bce(0 logits, 1) = iou(0.5 on a full mask) ... + 2 x bce(0 logits, sigmoid(0) = 0.5)
    assert parts["gradient"].item() == pytest.approx(math.log(2))
    assert total.item() == pytest.approx(math.log(2) + 0.5 + 2 * math.log(2), abs=1e-5)


# ------------------------------------------------------------------ loss.schedule

def _scheduled(epochs: int = 10, **phase) -> tuple[LossCfg, object]:
    cfg = LossCfg(terms={"bce": 30.0, "iou": 0.5, "mae": 100.0, "dice": 0.0},
                  schedule=[LossPhaseCfg(**phase)])
    return cfg, build_criterion(cfg, epochs=epochs)


def test_last_epochs_compound_as_the_original() -> None:
    """BiRefNet's train.py in its last N epochs: ``bce *= 0, iou *= 0.5, mae *= 0.9`` at the
    start of every epoch, so epoch e of the phase has iou 0.5 * 0.5^k, mae 100 * 0.9^k."""
    _, criterion = _scheduled(from_epoch=-3, per_epoch=True,
                              scale={"bce": 0.0, "iou": 0.5, "mae": 0.9})
    original = {"bce": 30.0, "iou": 0.5, "mae": 100.0}
    for epoch in range(1, 11):  # the original's loop, 1-based, mutating in place
        if epoch > 10 - 3:
            original = {"bce": original["bce"] * 0, "iou": original["iou"] * 0.5,
                        "mae": original["mae"] * 0.9}
        criterion.set_epoch(epoch - 1)
        for name, weight in original.items():
            assert criterion.weights[name] == pytest.approx(weight), (epoch, name)


def test_schedule_sets_and_scales_once_and_logs_the_switch_once() -> None:
    _, criterion = _scheduled(from_epoch=4, terms={"dice": 2.0}, scale={"iou": 0.5})
    assert "dice" in criterion.terms  # weight 0 in loss.terms, raised by the phase: built
    lines = [criterion.set_epoch(e) for e in range(6)]
    assert [line is not None for line in lines] == [False, False, False, True, False, False]
    assert "loss.schedule.0 from epoch 4" in lines[3] and "dice 2" in lines[3]
    assert criterion.weights == {"bce": 30.0, "iou": 0.25, "mae": 100.0, "dice": 2.0}
    criterion.set_epoch(1)  # weights are a function of the epoch, not of the history
    assert criterion.weights == {"bce": 30.0, "iou": 0.5, "mae": 100.0, "dice": 0.0}


def test_schedule_resumes_exactly() -> None:
    """A criterion built anew (a resumed run) and set to epoch e has the uninterrupted run's
    weights and logs its phase once."""
    kwargs = {"from_epoch": -4, "per_epoch": True, "scale": {"bce": 0.0, "mae": 0.9}}
    _, straight = _scheduled(**kwargs)
    for epoch in range(8):
        straight.set_epoch(epoch)
    _, resumed = _scheduled(**kwargs)
    line = resumed.set_epoch(7)
    assert line is not None and "loss weights at epoch 8" in line
    assert resumed.weights == straight.weights
    assert resumed.weights["mae"] == pytest.approx(100 * 0.9**2)
    assert resumed.set_epoch(7) is None


def test_longer_than_the_run_means_the_whole_run() -> None:
    _, criterion = _scheduled(epochs=2, from_epoch=-20, scale={"bce": 0.0})
    criterion.set_epoch(0)
    assert criterion.weights["bce"] == 0.0


@pytest.mark.parametrize(("phase", "key"), [
    ({"scale": {"bcee": 0.5}}, "loss.schedule.0.scale.bcee"),
    ({"terms": {"ssim": 1.0}}, "loss.schedule.0.terms.ssim"),
    ({"terms": {"bce": -1.0}}, "loss.schedule.0.terms.bce"),
    ({"from_epoch": 0, "scale": {"bce": 0.5}}, "loss.schedule.0.from_epoch"),
    ({}, "loss.schedule.0"),
])
def test_bad_schedule_is_one_line_naming_the_key(phase: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _scheduled(**phase)
    message = str(info.value)
    assert message.startswith(f"{key}:") and "\n" not in message


def test_schedule_key_loads_from_yaml(tmp_path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text("loss:\n  terms: {bce: 1, mae: 1}\n  schedule:\n"
                      "    - {from_epoch: -2, scale: {mae: 0.9}, per_epoch: true}\n")
    cfg = load_config(recipe)
    assert cfg.loss.schedule == [LossPhaseCfg(from_epoch=-2, scale={"mae": 0.9},
                                              per_epoch=True)]
    with pytest.raises(ConfigError, match=r"key .loss\.schedule\.0\.from_epch.; did you mean"):
        load_config(recipe, ["loss.schedule=[{from_epch: 3}]"])
    # names are checked when the config is loaded, before any data or network is touched
    with pytest.raises(ConfigError, match=r"^loss\.schedule\.0\.scale\.bcee: 'bcee' is not"):
        load_config(recipe, ["loss.schedule=[{from_epoch: 2, scale: {bcee: 0}}]"])


@pytest.mark.slow
def test_training_resumed_into_a_phase_ends_as_the_straight_run(data_root, tmp_path) -> None:
    """The trainer sets the weights at every epoch start, a resumed one included: resuming
    from epoch 1 into a phase that starts at epoch 2 ends with the straight run's weights, and
    each run logs the switch once."""
    from sodkit.cli import main
    from tests.sod_fixtures import tiny_overrides

    recipe = str(Path(__file__).resolve().parents[1] / "configs" / "demo.yaml")
    common = ["eval.every=0", "data.test=[]", "train.keep_every=1", "train.steps_per_epoch=2",
              "loss.terms={bce: 1, iou: 1, mae: 0}",
              "loss.schedule=[{from_epoch: 2, terms: {mae: 5}, scale: {iou: 0.5}}]"]
    assert main(["train", recipe, *tiny_overrides(data_root, tmp_path, "straight"),
                 *common]) == 0
    snapshot = tmp_path / "straight" / "checkpoints" / "epoch_0001.pt"
    assert main(["train", recipe, *tiny_overrides(data_root, tmp_path, "resumed"), *common,
                 "--resume", str(snapshot)]) == 0
    a = torch.load(tmp_path / "straight/checkpoints/last.pt", weights_only=True)
    b = torch.load(tmp_path / "resumed/checkpoints/last.pt", weights_only=True)
    assert (a["step"], b["step"]) == (4, 4)
    for key, value in a["model"].items():
        assert torch.equal(value, b["model"][key]), key
    for run in ("straight", "resumed"):
        log = (tmp_path / run / "train.log").read_text()
        assert log.count("loss.schedule.0 from epoch 2") == 1, run
        assert "bce 1, iou 0.5, mae 5" in log
    unscheduled = tiny_overrides(data_root, tmp_path, "plain") + common[:-1]
    assert main(["train", recipe, *unscheduled]) == 0
    c = torch.load(tmp_path / "plain/checkpoints/last.pt", weights_only=True)
    assert any(not torch.equal(v, c["model"][k]) for k, v in a["model"].items())
