"""The field's losses (wBCE, wIoU, structure, SSIM, CEL): hand-computed values, gradcheck,
parameters from the config, per-side-output weights, and the criterion as a module."""

from __future__ import annotations

import math

import pytest
import torch

from sodkit.config import ConfigError, LossCfg
from sodkit.loss import (
    LOSSES,
    SSIMLoss,
    bce_loss,
    build_criterion,
    cel_loss,
    structure_loss,
    wbce_loss,
    wiou_loss,
)
from sodkit.loss.ssim import C1


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    """A 1x2 image: mask [0, 1], logits [0, 2]."""
    return torch.tensor([[[[0.0, 2.0]]]]), torch.tensor([[[[0.0, 1.0]]]])


def test_registered() -> None:
    assert {"bce", "iou", "dice", "wbce", "wiou", "structure", "ssim", "cel"} <= set(
        LOSSES.names())


def test_weighted_bce_and_iou_by_hand() -> None:
    logits, mask = _pair()
    # kernel 3, zero padding, count_include_pad: each pixel's 3x3 mean is 1/9
    w0, w1 = 1 + 5 * (1 / 9), 1 + 5 * (8 / 9)
    bce0, bce1 = math.log(2), math.log1p(math.exp(-2))
    expected_bce = (w0 * bce0 + w1 * bce1) / (w0 + w1)
    assert wbce_loss(logits, mask, kernel=3).item() == pytest.approx(expected_bce, rel=1e-6)
    p1 = 1 / (1 + math.exp(-2))
    inter = w1 * p1
    union = w0 * 0.5 + w1 * (p1 + 1) - inter
    expected_iou = 1 - inter / union
    assert wiou_loss(logits, mask, kernel=3, smooth=1e-6).item() == pytest.approx(
        expected_iou, rel=1e-5)
    assert structure_loss(logits, mask, kernel=3, weighted_bce=True, smooth=1e-6).item() == (
        pytest.approx(expected_bce + expected_iou, rel=1e-5))


def test_f3net_code_defaults_by_hand() -> None:
    """F3Net's released structure loss: plain mean BCE (its ``reduce='none'`` is the legacy
    flag) and the weighted IoU smoothed by 1 in numerator and denominator."""
    logits, mask = _pair()
    w0, w1 = 1 + 5 * (1 / 9), 1 + 5 * (8 / 9)
    plain_bce = (math.log(2) + math.log1p(math.exp(-2))) / 2
    p1 = 1 / (1 + math.exp(-2))
    inter = w1 * p1
    union = w0 * 0.5 + w1 * (p1 + 1) - inter
    smoothed_iou = 1 - (inter + 1) / (union + 1)
    assert wbce_loss(logits, mask, kernel=3, weighted=False).item() == pytest.approx(
        plain_bce, rel=1e-6)
    assert wiou_loss(logits, mask, kernel=3).item() == pytest.approx(smoothed_iou, rel=1e-6)
    assert structure_loss(logits, mask, kernel=3).item() == pytest.approx(
        plain_bce + smoothed_iou, rel=1e-6)
    # and the released code's own expression, evaluated the way it runs
    weight = 1 + 5 * torch.abs(torch.nn.functional.avg_pool2d(mask, 3, 1, 1) - mask)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logits, mask)  # reduce='none'
    wbce = (weight * bce).sum(dim=(2, 3)) / weight.sum(dim=(2, 3))
    prob = torch.sigmoid(logits)
    inter_t = (prob * mask * weight).sum(dim=(2, 3))
    union_t = ((prob + mask) * weight).sum(dim=(2, 3))
    released = (wbce + 1 - (inter_t + 1) / (union_t - inter_t + 1)).mean()
    assert structure_loss(logits, mask, kernel=3).item() == pytest.approx(released.item(),
                                                                           rel=1e-6)


def test_weighted_iou_smoothing_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"loss.terms.wiou: .*smooth must be > 0"):
        build_criterion(LossCfg(terms={"wiou": {"smooth": 0}}))


def test_weighted_bce_with_uniform_weights_is_bce() -> None:
    # gamma 0: every weight is 1
    logits, mask = torch.randn(2, 1, 6, 5), (torch.rand(2, 1, 6, 5) > 0.5).float()
    torch.testing.assert_close(wbce_loss(logits, mask, gamma=0.0), bce_loss(logits, mask))


def test_ssim_by_hand() -> None:
    # window 1: local means are the pixels, variances 0: SSIM = (2xy + C1) / (x^2 + y^2 + C1)
    mask = torch.ones(1, 1, 3, 3)
    value = SSIMLoss(window=1)(torch.zeros_like(mask), mask).item()
    assert value == pytest.approx(1 - (1 + C1) / (1.25 + C1), rel=1e-6)
    half = torch.zeros(1, 1, 8, 8)
    half[..., :4] = 1
    assert SSIMLoss()(40.0 * (2 * half - 1), half).item() == pytest.approx(0.0, abs=1e-6)


def test_cel_by_hand() -> None:
    half = torch.zeros(2, 1, 8, 8)
    half[..., :4] = 1
    # p = 0.5: FP + FN mass = N/2 * 0.5 + N/2 * 0.5 = N/2 over sum(p) + sum(t) = N
    assert cel_loss(torch.zeros_like(half), half).item() == pytest.approx(0.5, rel=1e-6)
    assert cel_loss(40.0 * (2 * half - 1), half).item() == pytest.approx(0.0, abs=1e-6)
    empty = torch.zeros_like(half)
    assert cel_loss(torch.full_like(half, -40.0), empty).item() == pytest.approx(0.0, abs=1e-6)


def test_cel_reductions_by_hand() -> None:
    """Batch of two 1x4 images: image 0 all salient, predicted p = 0.5 everywhere; image 1
    one salient pixel, predicted exactly. MINet's code pools the sums over the batch."""
    mask = torch.tensor([[[[1.0, 1.0, 1.0, 1.0]]], [[[1.0, 0.0, 0.0, 0.0]]]])
    logits = torch.tensor([[[[0.0, 0.0, 0.0, 0.0]]], [[[60.0, -60.0, -60.0, -60.0]]]])
    # image 0: FP + FN = sum(p + t - 2pt) = 4 * (0.5 + 1 - 1) = 2, sum(p + t) = 6; image 1: 0 / 2
    assert cel_loss(logits, mask, reduction="image").item() == pytest.approx(
        (2 / 6 + 0 / 2) / 2, rel=1e-6)
    assert cel_loss(logits, mask, reduction="batch").item() == pytest.approx(
        (2 + 0) / (6 + 2), rel=1e-6)
    assert cel_loss(logits, mask).item() == pytest.approx(2 / 8, rel=1e-6)  # default: batch
    # MINet's CEL module, line by line
    p = torch.sigmoid(logits)
    inter = p * mask
    released = ((p - inter).sum() + (mask - inter).sum()) / (p.sum() + mask.sum() + 1e-6)
    assert cel_loss(logits, mask).item() == pytest.approx(released.item(), rel=1e-6)
    with pytest.raises(ConfigError, match=r"loss.terms.cel: .*reduction"):
        build_criterion(LossCfg(terms={"cel": {"reduction": "pixel"}}))


@pytest.mark.parametrize("name", LOSSES.names())
def test_gradcheck(name: str) -> None:
    torch.manual_seed(0)
    params = {"window": 3} if name == "ssim" else {}
    params |= {"kernel": 3} if name in ("wbce", "wiou", "structure") else {}
    term = LOSSES.get(name)(**params)
    logits = torch.randn(2, 1, 4, 5, dtype=torch.float64, requires_grad=True)
    target = torch.rand(2, 1, 4, 5, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda x: term(x, target), (logits,))


@pytest.mark.parametrize("name", LOSSES.names())
def test_float32_under_autocast(name: str) -> None:
    mask = (torch.rand(2, 1, 8, 8) > 0.5).float()
    logits = torch.randn_like(mask, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = LOSSES.get(name)()(logits.bfloat16(), mask)
    assert value.dtype == torch.float32
    value.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_entry_with_parameters_beside_short_form() -> None:
    criterion = build_criterion(LossCfg(terms={"bce": 1, "ssim": {"weight": 0.5, "window": 3}},
                                        aux_weight=0))
    logits, mask = torch.randn(1, 1, 8, 8), (torch.rand(1, 1, 8, 8) > 0.5).float()
    total, parts = criterion({"logits": logits, "aux": []}, mask)
    expected = bce_loss(logits, mask) + 0.5 * SSIMLoss(window=3)(logits, mask)
    torch.testing.assert_close(total, expected)
    assert set(parts) == {"bce", "ssim"}


def test_bad_parameters_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"loss.terms.ssim: bad parameters .*windw"):
        build_criterion(LossCfg(terms={"ssim": {"windw": 3}}))
    with pytest.raises(ConfigError, match=r"loss.terms.ssim: .*odd"):
        build_criterion(LossCfg(terms={"ssim": {"window": 4}}))
    with pytest.raises(ConfigError, match=r"loss.terms.cel: the weight must be a number"):
        build_criterion(LossCfg(terms={"cel": {"weight": "x"}}))


def test_per_side_weights() -> None:
    torch.manual_seed(0)
    mask = (torch.rand(2, 1, 16, 16) > 0.5).float()
    sides = [torch.randn(2, 1, 4, 4), torch.randn(2, 1, 8, 8)]
    outputs = {"logits": torch.randn(2, 1, 16, 16), "aux": sides}
    criterion = build_criterion(LossCfg(terms={"bce": 1.0}, aux_weights=[0.25, 0.0]))
    total, parts = criterion(outputs, mask)
    side0 = bce_loss(sides[0], torch.nn.functional.avg_pool2d(mask, 4))
    torch.testing.assert_close(total, bce_loss(outputs["logits"], mask) + 0.25 * side0)
    torch.testing.assert_close(parts["aux"], 0.25 * side0)
    with pytest.raises(ValueError, match="3 weights but the network returns 2"):
        build_criterion(LossCfg(aux_weights=[1, 1, 1]))(outputs, mask)
    assert not LossCfg(aux_weights=[0.0, 0.0]).uses_aux and LossCfg(aux_weights=[0, 1]).uses_aux
    with pytest.raises(ConfigError, match="loss.aux_weights"):
        build_criterion(LossCfg(aux_weights=[-1.0]))


def test_f3net_total_loss_as_its_training_script_computes_it() -> None:
    """main_weight 0.5, aux_weights [1/16, 1/8, 1/4, 1/2, 1/2] for [r5, r4, r3, r2, p1] and
    side logits upsampled to the mask: (p1 + p2) / 2 + r2 / 2 + r3 / 4 + r4 / 8 + r5 / 16."""
    torch.manual_seed(0)
    mask = (torch.rand(2, 1, 32, 32) > 0.5).float()
    main = torch.randn(2, 1, 32, 32)
    sides = [torch.randn(2, 1, s, s) for s in (4, 8, 16, 32)] + [torch.randn(2, 1, 32, 32)]
    cfg = LossCfg(terms={"structure": 1.0}, main_weight=0.5, aux_upsample=True,
                  aux_weights=[1 / 16, 1 / 8, 1 / 4, 1 / 2, 1 / 2])
    total, _ = build_criterion(cfg)({"logits": main, "aux": sides}, mask)
    up = [torch.nn.functional.interpolate(s, size=(32, 32), mode="bilinear", align_corners=False)
          for s in sides]
    r5, r4, r3, r2, p1 = (structure_loss(u, mask) for u in up)
    expected = (p1 + structure_loss(main, mask)) / 2 + r2 / 2 + r3 / 4 + r4 / 8 + r5 / 16
    torch.testing.assert_close(total, expected)
    with pytest.raises(ConfigError, match="loss.main_weight"):
        build_criterion(LossCfg(main_weight=0))


def test_criterion_is_a_module_whose_buffers_follow_it() -> None:
    criterion = build_criterion(LossCfg(terms={"ssim": 1.0}))
    assert isinstance(criterion, torch.nn.Module)
    criterion.to(torch.float64)
    assert criterion.terms["ssim"].window.dtype == torch.float64
    assert not criterion.state_dict()  # the window is not persistent: nothing to checkpoint
