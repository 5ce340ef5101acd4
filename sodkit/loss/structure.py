"""F3Net's structure loss (Wei et al., AAAI 2020): pixel-weighted BCE and IoU.

A pixel's weight is ``1 + gamma * |avgpool_k(mask) - mask|``: pixels whose neighbourhood (k x k,
zero padded) disagrees with them, i.e. near boundaries and in thin parts, count up to
``1 + gamma`` times more. ``wbce`` and ``wiou`` are the two halves; ``structure`` is their sum.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .terms import EPS, as_float, register_function


def boundary_weights(target: Tensor, kernel: int = 31, gamma: float = 5.0) -> Tensor:
    """Per-pixel weights ``1 + gamma * |avgpool(target) - target|`` (same shape as target)."""
    if kernel < 1 or kernel % 2 == 0:
        raise ValueError(f"kernel must be an odd number >= 1, got {kernel}")
    pooled = F.avg_pool2d(target, kernel, stride=1, padding=kernel // 2)
    return 1.0 + gamma * (pooled - target).abs()


@register_function("wbce")
def wbce_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0) -> Tensor:
    """Weighted BCE: per image ``sum(w * bce) / sum(w)``, batch mean."""
    logits, target = as_float(logits, target)
    weight = boundary_weights(target, kernel, gamma)
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    return ((weight * bce).flatten(1).sum(1) / weight.flatten(1).sum(1)).mean()


@register_function("wiou")
def wiou_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0) -> Tensor:
    """Weighted IoU: per image ``1 - sum(w p t) / sum(w (p + t - p t))``, batch mean."""
    logits, target = as_float(logits, target)
    weight = boundary_weights(target, kernel, gamma).flatten(1)
    prob, target = torch.sigmoid(logits).flatten(1), target.flatten(1)
    inter = (weight * prob * target).sum(1)
    union = (weight * (prob + target)).sum(1) - inter
    return (1.0 - (inter + EPS) / (union + EPS)).mean()


@register_function("structure")
def structure_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0
                   ) -> Tensor:
    """F3Net's structure loss: ``wbce + wiou``."""
    return wbce_loss(logits, target, kernel, gamma) + wiou_loss(logits, target, kernel, gamma)
