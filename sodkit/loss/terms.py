"""Loss terms: ``term(logits, target) -> scalar``, batch mean, computed in float32 or float64.

``logits`` are raw network outputs (B, 1, H, W); ``target`` is a float mask in [0, 1] of the same
size (soft values allowed, e.g. area-downsampled masks for side outputs). Half-precision inputs
are cast to float32 so that an fp16/bf16 autocast forward never reduces sums of H*W
probabilities in half precision; float64 stays float64 (``torch.autograd.gradcheck``).
Region terms (IoU, Dice, CEL) are computed per image and then averaged, so a small object counts
as much as a large one.

``LOSSES`` maps a name to a builder ``(**params) -> nn.Module``: a config entry may carry its own
parameters (``{ssim: {weight: 1, window: 11}}``). Plain functions are registered with
:func:`register_function`, which wraps them in :class:`FunctionTerm`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..registry import Registry

LossFn = Callable[..., Tensor]
LOSSES: Registry[Callable[..., nn.Module]] = Registry("loss")

# Smoothing of the region ratios: an empty mask with an empty prediction gives 0 instead of 0/0,
# while non-empty masks keep their exact ratios (unlike F3Net-style "+1" smoothing). An empty mask
# with a non-empty prediction scores ~1 with almost no gradient: BCE is what trains those pixels.
EPS = 1e-6


class FunctionTerm(nn.Module):
    """A loss function with its config parameters bound; parameter names are checked here, at
    build time, so a misspelt one is a config error before training starts."""

    def __init__(self, fn: LossFn, check: Callable[..., None] | None = None, **params: Any
                 ) -> None:
        super().__init__()
        inspect.signature(fn).bind(None, None, **params)  # TypeError on unknown names
        if check is not None:
            check(**params)  # ValueError on bad values, before any training
        self.fn, self.params = fn, params

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        return self.fn(logits, target, **self.params)

    def extra_repr(self) -> str:
        return f"{self.fn.__name__}, {self.params}"


def register_function(name: str, check: Callable[..., None] | None = None
                      ) -> Callable[[LossFn], LossFn]:
    """Register ``fn(logits, target, **params)`` as the loss ``name``; returns ``fn`` unchanged.
    ``check(**params)`` raises ValueError on values ``fn`` would reject, at build time."""

    def decorator(fn: LossFn) -> LossFn:
        LOSSES.register(name)(functools.partial(FunctionTerm, fn, check))
        return fn

    return decorator


def as_float(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Both at float32 at least (float64 is kept); the shapes must match."""
    if logits.shape != target.shape:
        raise ValueError(f"logits {tuple(logits.shape)} and target {tuple(target.shape)} differ")
    dtype = torch.float64 if torch.float64 in (logits.dtype, target.dtype) else torch.float32
    return logits.to(dtype), target.to(dtype)


@register_function("bce")
def bce_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Pixel-wise binary cross-entropy with logits (numerically stable), mean over all pixels."""
    logits, target = as_float(logits, target)
    return F.binary_cross_entropy_with_logits(logits, target)


def _region_sums(logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per-image sum(p * t), sum(p), sum(t) with p = sigmoid(logits)."""
    logits, target = as_float(logits, target)
    prob = torch.sigmoid(logits).flatten(1)
    target = target.flatten(1)
    return (prob * target).sum(1), prob.sum(1), target.sum(1)


def _reduction_check(allowed: tuple[str, ...]) -> Callable[..., None]:
    """A term's ``check``: its ``reduction`` parameter must be one of ``allowed``."""
    def check(reduction: str = allowed[0]) -> None:
        if reduction not in allowed:
            raise ValueError(f"reduction must be one of {list(allowed)}, got {reduction!r}")
    return check


BATCH_REDUCTIONS = ("mean", "sum")
_check_batch_reduction = _reduction_check(BATCH_REDUCTIONS)


@register_function("iou", check=_check_batch_reduction)
def iou_loss(logits: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Soft IoU loss ``1 - sum(p t) / sum(p + t - p t)`` per image; ``reduction``: the batch
    mean (default), or ``sum`` over the batch (BiRefNet's ``IoULoss``, loss.py: its weight then
    grows with the batch size)."""
    _check_batch_reduction(reduction)
    inter, prob_sum, target_sum = _region_sums(logits, target)
    union = prob_sum + target_sum - inter
    per_image = 1.0 - (inter + EPS) / (union + EPS)
    return per_image.sum() if reduction == "sum" else per_image.mean()


@register_function("mae")
def mae_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Mean absolute error ``mean |sigmoid(logits) - t|`` over all pixels (BiRefNet's ``mae``
    pixel loss, ``nn.L1Loss`` on the probabilities): the metric MAE as a loss."""
    logits, target = as_float(logits, target)
    return (torch.sigmoid(logits) - target).abs().mean()


@register_function("dice")
def dice_loss(logits: Tensor, target: Tensor) -> Tensor:
    """Soft Dice loss ``1 - 2 sum(p t) / (sum(p) + sum(t))`` per image, batch mean."""
    inter, prob_sum, target_sum = _region_sums(logits, target)
    return (1.0 - (2.0 * inter + EPS) / (prob_sum + target_sum + EPS)).mean()


CEL_REDUCTIONS = ("batch", "image")
_check_cel = _reduction_check(CEL_REDUCTIONS)


@register_function("cel", check=_check_cel)
def cel_loss(logits: Tensor, target: Tensor, reduction: str = "batch") -> Tensor:
    """MINet's consistency-enhanced loss ``sum(p + t - 2 p t) / sum(p + t)``: false positives
    plus false negatives over the total mass, so the loss does not depend on the object's size
    and pushes whole regions towards a uniform prediction.

    ``reduction="batch"`` (default, MINet's released code): the sums run over the whole batch,
    so a large object weighs more than a small one in the same batch. ``"image"``: one ratio per
    image, then the batch mean (every image counts the same; equal to "batch" at batch size 1).
    """
    _check_cel(reduction)
    inter, prob_sum, target_sum = _region_sums(logits, target)
    if reduction == "batch":
        inter, prob_sum, target_sum = inter.sum(), prob_sum.sum(), target_sum.sum()
    total = prob_sum + target_sum
    return ((total - 2.0 * inter) / (total + EPS)).mean()
