"""Loss terms on known values, float32 under autocast, and the deep-supervision criterion."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from sodkit.config import ConfigError, LossCfg
from sodkit.loss import LOSSES, bce_loss, build_criterion, dice_loss, iou_loss


def _half_mask() -> torch.Tensor:
    mask = torch.zeros(2, 1, 8, 8)
    mask[..., :4] = 1.0
    return mask


def test_registered_terms() -> None:
    assert {"bce", "iou", "dice"} <= set(LOSSES.names())


def test_bce_known_values() -> None:
    mask = _half_mask()
    assert bce_loss(torch.zeros_like(mask), mask).item() == pytest.approx(math.log(2))
    logits = torch.randn(3, 1, 9, 7)
    target = torch.rand(3, 1, 9, 7)
    expected = F.binary_cross_entropy_with_logits(logits, target)
    torch.testing.assert_close(bce_loss(logits, target), expected)


@pytest.mark.parametrize(("fn", "half"), [(iou_loss, 2 / 3), (dice_loss, 1 / 2)])
def test_region_losses_known_values(fn, half: float) -> None:
    """``half``: the loss of p = 0.5 everywhere on a mask with half of the pixels salient."""
    mask = _half_mask()
    perfect = 30.0 * (2 * mask - 1)
    assert fn(perfect, mask).item() == pytest.approx(0.0, abs=1e-6)
    assert fn(-perfect, mask).item() == pytest.approx(1.0, abs=1e-6)  # disjoint
    # IoU = (N/4) / (3N/4) = 1/3, Dice = (N/2) / N = 1/2
    assert fn(torch.zeros_like(mask), mask).item() == pytest.approx(half, abs=1e-6)
    empty = torch.zeros_like(mask)  # empty mask, (almost) empty prediction: no loss, no NaN
    assert fn(torch.full_like(mask, -30.0), empty).item() == pytest.approx(0.0, abs=1e-4)


def test_region_losses_are_per_image_means() -> None:
    mask = _half_mask()
    logits = torch.stack([30.0 * (2 * mask[0] - 1), -30.0 * (2 * mask[1] - 1)])
    assert iou_loss(logits, mask).item() == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("fn", [bce_loss, iou_loss, dice_loss])
def test_float32_under_autocast(fn) -> None:
    mask = _half_mask()
    logits = torch.randn_like(mask, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = fn(logits.bfloat16(), mask)
    assert value.dtype == torch.float32
    value.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="differ"):
        bce_loss(torch.zeros(1, 1, 4, 4), torch.zeros(1, 1, 8, 8))


def _outputs() -> tuple[dict, torch.Tensor]:
    torch.manual_seed(0)
    mask = (torch.rand(2, 1, 16, 16) > 0.5).float()
    outputs = {
        "logits": torch.randn(2, 1, 16, 16, requires_grad=True),
        "aux": [torch.randn(2, 1, 4, 4, requires_grad=True), torch.randn(2, 1, 8, 8)],
    }
    return outputs, mask


def test_criterion_sums_weighted_terms_with_deep_supervision() -> None:
    outputs, mask = _outputs()
    criterion = build_criterion(LossCfg(terms={"bce": 1.0, "iou": 0.5}, aux_weight=0.25))
    total, parts = criterion(outputs, mask)

    def weighted(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return bce_loss(logits, target) + 0.5 * iou_loss(logits, target)

    # area interpolation = the mean of the mask over each side pixel's footprint
    side_masks = [F.avg_pool2d(mask, 4), F.avg_pool2d(mask, 2)]
    aux = sum(weighted(s, m) for s, m in zip(outputs["aux"], side_masks, strict=True))
    expected = weighted(outputs["logits"], mask) + 0.25 * aux
    torch.testing.assert_close(total, expected)
    assert set(parts) == {"bce", "iou", "aux"}
    torch.testing.assert_close(parts["bce"], bce_loss(outputs["logits"], mask))
    torch.testing.assert_close(parts["aux"], aux)
    assert all(not v.requires_grad and v.ndim == 0 for v in parts.values())
    total.backward()
    assert outputs["aux"][0].grad is not None


def test_criterion_without_aux() -> None:
    outputs, mask = _outputs()
    total, parts = build_criterion(LossCfg(terms={"dice": 2.0}, aux_weight=0.0))(outputs, mask)
    torch.testing.assert_close(total, 2.0 * dice_loss(outputs["logits"], mask))
    assert set(parts) == {"dice"}
    total, parts = build_criterion(LossCfg(terms={"dice": 1.0}))({"logits": outputs["logits"],
                                                                  "aux": []}, mask)
    assert "aux" not in parts


def test_unknown_term_names_its_key() -> None:
    expected = r"loss.terms.bcee: unknown loss 'bcee'; did you mean 'bce'"
    with pytest.raises(ConfigError, match=expected):
        build_criterion(LossCfg(terms={"bcee": 1.0}))
    with pytest.raises(ConfigError, match="loss.terms.iou"):
        build_criterion(LossCfg(terms={"iou": -1.0}))
