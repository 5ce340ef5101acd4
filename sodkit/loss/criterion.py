"""Weighted loss terms with deep supervision: ``Criterion(outputs, mask) -> (total, parts)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..config.loader import ConfigError
from ..config.schema import LossCfg
from .terms import LOSSES, LossFn


class Criterion:
    """Applies ``terms`` (name -> weight) to the main logits and, times ``aux_weight``, to each
    side output.

    Side outputs are supervised at their own resolution: the mask is downsampled with **area**
    interpolation (the mean of the mask over each side pixel's footprint). That is the exact
    fraction of salient pixels the coarse logit stands for, so thin structures give soft targets
    instead of vanishing (bilinear downsampling samples a 2x2 neighbourhood and aliases), and the
    loss costs h*w per side instead of H*W (upsampling the side logits would).

    ``parts`` holds detached scalars for logging (no ``.item()``: reduce them at the log
    interval): one per main term (``bce``, ``iou``, ...), ``aux`` (the unweighted sum over side
    outputs of their weighted term sums; present only when aux_weight > 0 and there are side
    outputs). The total is the first return value, not repeated in ``parts``.
    """

    def __init__(self, terms: dict[str, tuple[LossFn, float]], aux_weight: float = 0.0) -> None:
        self.terms = terms
        self.aux_weight = aux_weight

    def _weighted(self, logits: Tensor, target: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        values = {name: fn(logits, target) for name, (fn, _) in self.terms.items()}
        total = torch.stack([weight * values[name] for name, (_, weight) in self.terms.items()])
        return total.sum(), values

    def __call__(
        self, outputs: Mapping[str, Any], mask: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        mask = mask.float()
        total, values = self._weighted(outputs["logits"], mask)
        parts = {name: v.detach() for name, v in values.items()}
        sides = outputs.get("aux") or []
        if self.aux_weight > 0 and sides:
            aux = torch.stack([self._weighted(s, _fit_mask(mask, s))[0] for s in sides]).sum()
            total = total + self.aux_weight * aux
            parts["aux"] = aux.detach()
        return total, parts


def _fit_mask(mask: Tensor, side: Tensor) -> Tensor:
    """The mask at the side output's size (area interpolation; unchanged if sizes match)."""
    if mask.shape[-2:] == side.shape[-2:]:
        return mask
    return F.interpolate(mask, size=side.shape[-2:], mode="area")


def build_criterion(cfg: LossCfg) -> Criterion:
    """Check the ``loss`` section against the registered terms and build the criterion."""
    if not cfg.terms:
        raise ConfigError(f"loss.terms: at least one term is needed (registered: {LOSSES.names()})")
    terms: dict[str, tuple[LossFn, float]] = {}
    for name, weight in cfg.terms.items():
        if name not in LOSSES:
            raise ConfigError(f"loss.terms.{name}: {LOSSES.unknown_message(name)}")
        if weight < 0:
            raise ConfigError(f"loss.terms.{name}: the weight must be >= 0, got {weight}")
        if weight > 0:
            terms[name] = (LOSSES.get(name), float(weight))
    if not terms:
        raise ConfigError("loss.terms: every weight is 0, so nothing would be trained")
    if cfg.aux_weight < 0:
        raise ConfigError(f"loss.aux_weight: must be >= 0, got {cfg.aux_weight}")
    return Criterion(terms, cfg.aux_weight)
