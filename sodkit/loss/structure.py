"""F3Net's structure loss (Wei et al., AAAI 2020): pixel-weighted BCE and IoU.

A pixel's weight is ``1 + gamma * |avgpool_k(mask) - mask|``: pixels whose neighbourhood (k x k,
zero padded) disagrees with them, i.e. near boundaries and in thin parts, count up to
``1 + gamma`` times more. ``wbce`` and ``wiou`` are the two halves; ``structure`` is their sum.

Two details differ between the paper and the authors' released training code, and both are
offered (see docs/zoo.md):

- the BCE half: the paper weights it; the released code passes ``reduce='none'`` to
  ``binary_cross_entropy_with_logits``, which PyTorch reads as its legacy ``reduce`` flag (a
  true value: mean), so the "weighted" BCE there is the plain mean BCE. ``structure`` defaults
  to the released code (``weighted_bce: false``); ``wbce`` is weighted unless ``weighted: false``.
- the IoU half's smoothing: the released code adds 1 to the weighted intersection and union
  (``smooth: 1``, the default); ``smooth: 1e-6`` gives the paper's ratio almost exactly, which
  matters for small objects at low resolution, where a weighted union of a few units makes a
  smoothing of 1 a large share.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .terms import as_float, register_function


def boundary_weights(target: Tensor, kernel: int = 31, gamma: float = 5.0) -> Tensor:
    """Per-pixel weights ``1 + gamma * |avgpool(target) - target|`` (same shape as target)."""
    if kernel < 1 or kernel % 2 == 0:
        raise ValueError(f"kernel must be an odd number >= 1, got {kernel}")
    pooled = F.avg_pool2d(target, kernel, stride=1, padding=kernel // 2)
    return 1.0 + gamma * (pooled - target).abs()


def _check(kernel: int = 31, gamma: float = 5.0, smooth: float = 1.0, **_: object) -> None:
    if kernel < 1 or kernel % 2 == 0:
        raise ValueError(f"kernel must be an odd number >= 1, got {kernel}")
    if smooth <= 0:
        raise ValueError(f"smooth must be > 0 (it keeps empty masks finite), got {smooth}")


@register_function("wbce", check=_check)
def wbce_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0,
              weighted: bool = True) -> Tensor:
    """Weighted BCE: per image ``sum(w * bce) / sum(w)``, batch mean; ``weighted=False``: the
    plain mean BCE (what F3Net's released code computes)."""
    logits, target = as_float(logits, target)
    if not weighted:
        return F.binary_cross_entropy_with_logits(logits, target)
    weight = boundary_weights(target, kernel, gamma)
    bce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    return ((weight * bce).flatten(1).sum(1) / weight.flatten(1).sum(1)).mean()


@register_function("wiou", check=_check)
def wiou_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0,
              smooth: float = 1.0) -> Tensor:
    """Weighted IoU: per image ``1 - (sum(w p t) + s) / (sum(w (p + t - p t)) + s)``, batch mean;
    ``s = smooth`` (1 in F3Net's released code)."""
    _check(kernel, gamma, smooth)
    logits, target = as_float(logits, target)
    weight = boundary_weights(target, kernel, gamma).flatten(1)
    prob, target = torch.sigmoid(logits).flatten(1), target.flatten(1)
    inter = (weight * prob * target).sum(1)
    union = (weight * (prob + target)).sum(1) - inter
    return (1.0 - (inter + smooth) / (union + smooth)).mean()


@register_function("structure", check=_check)
def structure_loss(logits: Tensor, target: Tensor, kernel: int = 31, gamma: float = 5.0,
                   weighted_bce: bool = False, smooth: float = 1.0) -> Tensor:
    """F3Net's structure loss: BCE (plain by default, as released; ``weighted_bce: true`` as in
    the paper) + weighted IoU (smoothing ``smooth``)."""
    return (wbce_loss(logits, target, kernel, gamma, weighted=weighted_bce)
            + wiou_loss(logits, target, kernel, gamma, smooth=smooth))
