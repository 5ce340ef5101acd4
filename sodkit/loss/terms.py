"""Loss terms: ``fn(logits, target) -> scalar``, batch mean, always computed in float32.

``logits`` are raw network outputs (B, 1, H, W); ``target`` is a float mask in [0, 1] of the same
size (soft values allowed, e.g. area-downsampled masks for side outputs). Both are cast to float32
so that an fp16/bf16 autocast forward never reduces sums of H*W probabilities in half precision.
Region terms (IoU, Dice) are computed per image and then averaged, so a small object counts as
much as a large one.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..registry import Registry

LossFn = Callable[[Tensor, Tensor], Tensor]
LOSSES: Registry[LossFn] = Registry("loss")

# Smoothing of the region ratios: an empty mask with an empty prediction gives 0 instead of 0/0,
# while non-empty masks keep their exact ratios (unlike F3Net-style "+1" smoothing). An empty mask
# with a non-empty prediction scores ~1 with almost no gradient: BCE is what trains those pixels.
EPS = 1e-6


def _as_float(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    if logits.shape != target.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} differ")
    return logits.float(), target.float()


@LOSSES.register("bce")
def bce_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Pixel-wise binary cross-entropy with logits (numerically stable), mean over all pixels."""
    logits, target = _as_float(logits, target)
    return F.binary_cross_entropy_with_logits(logits, target)


def _region_sums(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-image sum(p * t), sum(p), sum(t) with p = sigmoid(logits)."""
    logits, target = _as_float(logits, target)
    prob = torch.sigmoid(logits).flatten(1)
    target = target.flatten(1)
    return (prob * target).sum(1), prob.sum(1), target.sum(1)


@LOSSES.register("iou")
def iou_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Soft IoU loss ``1 - sum(p t) / sum(p + t - p t)`` per image, batch mean."""
    inter, prob_sum, target_sum = _region_sums(logits, target)
    union = prob_sum + target_sum - inter
    return (1.0 - (inter + EPS) / (union + EPS)).mean()


@LOSSES.register("dice")
def dice_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Soft Dice loss ``1 - 2 sum(p t) / (sum(p) + sum(t))`` per image, batch mean."""
    inter, prob_sum, target_sum = _region_sums(logits, target)
    return (1.0 - (2.0 * inter + EPS) / (prob_sum + target_sum + EPS)).mean()
