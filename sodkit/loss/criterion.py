"""Weighted loss terms with deep supervision: ``Criterion(outputs, mask) -> (total, parts)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config.ranges import Range, check_number, check_ranges
from ..config.schema import LossCfg
from ..errors import ConfigError
from ..module.conv import resize_to
from .gradient import gradient_reference_loss
from .schedule import LossSchedule, build_schedule, scheduled_names
from .terms import LOSSES

TERM_WEIGHT = Range(low=0, hint="0 leaves the term out")  # loss.terms.<name>: a weight >= 0


class Criterion(nn.Module):
    """Applies ``terms`` (name -> (module, weight)) to the main logits and to each side output.

    An ``nn.Module``: terms with buffers (the SSIM window) follow ``criterion.to(device)``.

    The main output's terms are scaled by ``main_weight`` (1; F3Net's 0.5). Side outputs are
    weighted either all by ``aux_weight`` or, when ``aux_weights`` is given, one weight each, in
    the network's ``aux`` order (its length must match). By default they are supervised at their
    own resolution: the mask is downsampled with **area** interpolation (the mean of the mask
    over each side pixel's footprint). That is the exact fraction of salient pixels the coarse
    logit stands for, so thin structures give soft targets instead of vanishing (bilinear
    downsampling samples a 2x2 neighbourhood and aliases), and the loss costs h*w per side
    instead of H*W. ``aux_upsample=True`` instead upsamples each side's logits bilinearly to the
    mask's size (F3Net's code): boundary-weighted terms then see the sharp mask.

    ``parts`` holds detached scalars for logging (no ``.item()``: reduce them at the log
    interval): one per main term (``bce``, ``iou``, ...), and ``aux``: with ``aux_weight``, the
    unweighted sum over side outputs of their weighted term sums; with ``aux_weights``, the
    per-side weighted sum (what is added to the total). ``aux`` is present only when side
    outputs are weighted and exist. The total is the first return value, not in ``parts``.

    ``gradient_weight`` > 0 adds BiRefNet's gradient reference loss (``gradient`` in
    ``parts``) from the network's ``gradient`` / ``gradient_target`` outputs; ``schedule``
    (``loss.schedule``) changes the term weights, main and side outputs alike, at each
    :meth:`set_epoch`.
    """

    def __init__(self, terms: dict[str, tuple[nn.Module, float]], aux_weight: float = 0.0,
                 aux_weights: list[float] | None = None, main_weight: float = 1.0,
                 aux_upsample: bool = False, aux_align_corners: bool = False,
                 gradient_weight: float = 0.0, schedule: LossSchedule | None = None) -> None:
        super().__init__()
        self.terms = nn.ModuleDict({name: term for name, (term, _) in terms.items()})
        self.weights = {name: weight for name, (_, weight) in terms.items()}
        self.aux_weight = aux_weight
        self.aux_weights = aux_weights
        self.main_weight = main_weight
        self.aux_upsample = aux_upsample
        self.aux_align_corners = aux_align_corners
        self.gradient_weight = gradient_weight
        self.schedule = schedule
        self._phase: object = None  # the schedule phase of the last set_epoch

    def set_epoch(self, epoch: int) -> str | None:
        """The term weights of epoch ``epoch`` (0-based, as the trainer counts) from
        ``loss.schedule``; returns a line to log when a phase starts (or a run resumes into
        one), else None. Without a schedule: nothing changes."""
        if self.schedule is None:
            return None
        weights = self.schedule.weights(epoch + 1)
        self.weights = {name: weights[name] for name in self.weights}
        phase = self.schedule.phase(epoch + 1)
        if phase is self._phase:
            return None
        self._phase = phase
        return self.schedule.describe(epoch + 1)

    def _side(self, side: Tensor, mask: Tensor) -> Tensor:
        """The weighted term sum of one side output against the mask, at the chosen size."""
        if self.aux_upsample:
            if self.aux_align_corners:
                side = F.interpolate(side, size=mask.shape[-2:], mode="bilinear",
                                     align_corners=True)
            return self._weighted(resize_to(side, mask.shape[-2:]), mask)[0]
        return self._weighted(side, _fit_mask(mask, side))[0]

    def _weighted(self, logits: Tensor, target: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        values = {name: term(logits, target) for name, term in self.terms.items()}
        total = torch.stack([self.weights[name] * value for name, value in values.items()])
        return total.sum(), values

    def _aux(self, sides: list[Tensor], mask: Tensor) -> Tensor | None:
        """The side outputs' contribution before ``aux_weight`` (None: nothing to add)."""
        if self.aux_weights is None:
            if self.aux_weight <= 0 or not sides:
                return None
            return torch.stack([self._side(s, mask) for s in sides]).sum()
        if not any(w > 0 for w in self.aux_weights):
            return None  # the network computes no side outputs then (build_network)
        if len(self.aux_weights) != len(sides):
            raise ConfigError(aux_weights_message(self.aux_weights, len(sides), "the network"))
        used = [(s, w) for s, w in zip(sides, self.aux_weights, strict=True) if w > 0]
        return torch.stack([w * self._side(s, mask) for s, w in used]).sum()

    def forward(self, outputs: Mapping[str, Any], mask: Tensor
                ) -> tuple[Tensor, dict[str, Tensor]]:
        mask = mask if mask.dtype == torch.float64 else mask.float()
        total, values = self._weighted(outputs["logits"], mask)
        total = self.main_weight * total
        parts = {name: v.detach() for name, v in values.items()}
        aux = self._aux(list(outputs.get("aux") or []), mask)
        if aux is not None:
            scale = 1.0 if self.aux_weights is not None else self.aux_weight
            total = total + scale * aux
            parts["aux"] = aux.detach()
        if self.gradient_weight > 0:
            if "gradient" not in outputs:
                raise ValueError("loss.gradient_weight > 0 but the network returned no "
                                 "gradient outputs (set_gradient_outputs)")
            gradient = gradient_reference_loss(outputs["gradient"], outputs["gradient_target"])
            total = total + self.gradient_weight * gradient
            parts["gradient"] = gradient.detach()
        return total, parts


def _fit_mask(mask: Tensor, side: Tensor) -> Tensor:
    """The mask at the side output's size (area interpolation; unchanged if sizes match)."""
    if mask.shape[-2:] == side.shape[-2:]:
        return mask
    return F.interpolate(mask, size=side.shape[-2:], mode="area")


def _build_term(name: str, entry: Any, scheduled: bool = False
                ) -> tuple[nn.Module, float] | None:
    """One ``loss.terms`` entry: a weight (``bce: 1``) or a mapping with ``weight`` and the
    term's own parameters (``ssim: {weight: 1, window: 11}``); None when its weight is 0 (and
    no ``loss.schedule`` phase gives it one: ``scheduled``)."""
    key = f"loss.terms.{name}"
    if name not in LOSSES:
        raise ConfigError(f"{key}: {LOSSES.unknown_message(name)}")
    params = dict(entry) if isinstance(entry, Mapping) else {"weight": entry}
    weight = params.pop("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"{key}: the weight must be a number, got {weight!r}")
    check_number(weight, TERM_WEIGHT, f"{key}.weight" if isinstance(entry, Mapping) else key,
                 ConfigError)
    if weight == 0 and not scheduled:
        return None
    try:
        term = LOSSES.get(name)(**params)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: bad parameters {params}: {exc}") from exc
    return term, float(weight)


def aux_weights_message(weights: list[float], sides: int, network: str) -> str:
    return (f"loss.aux_weights has {len(weights)} weights but {network} returns {sides} side "
            f"outputs (coarse to fine; got {weights}): give one weight per side output, or use "
            f"loss.aux_weight")


def build_criterion(cfg: LossCfg, network: nn.Module | None = None,
                    epochs: int | None = None) -> Criterion:
    """Check the ``loss`` section against the registered terms and build the criterion;
    with ``network``, ``loss.aux_weights`` must also give one weight per side output it has
    (checked here, before training, rather than at the first step), and ``loss.gradient_weight``
    switches on the network's gradient outputs (BiRefNet's ``set_gradient_outputs``).
    ``epochs``: the run's length, for ``loss.schedule`` (without it the schedule is only
    checked against epoch 1, and the weights stay ``loss.terms``'s)."""
    if not cfg.terms:
        raise ConfigError(f"loss.terms: at least one term is needed (registered: {LOSSES.names()})")
    raised = scheduled_names(cfg)
    terms = {name: built for name, entry in cfg.terms.items()
             if (built := _build_term(name, entry, name in raised)) is not None}
    if not any(weight > 0 for _, weight in terms.values()):
        raise ConfigError("loss.terms: every weight is 0, so nothing would be trained")
    base = {name: weight for name, (_, weight) in terms.items()}
    for name in cfg.terms:  # unbuilt (weight 0): a phase may still scale it
        base.setdefault(name, 0.0)
    schedule = build_schedule(cfg, base, epochs or 1)
    _gradient_outputs(cfg, network)
    check_ranges(cfg, "loss.", ConfigError)  # a LossCfg built in code, not loaded
    sides = getattr(network, "side_outputs", None)
    if cfg.aux_weights is not None and sides is not None and len(cfg.aux_weights) != sides:
        backbone = getattr(getattr(network, "backbone", None), "name", "")
        name = f"{type(network).__name__} ({backbone})" if backbone else type(network).__name__
        raise ConfigError(aux_weights_message(cfg.aux_weights, sides, name))
    return Criterion(terms, cfg.aux_weight, cfg.aux_weights, cfg.main_weight, cfg.aux_upsample,
                     cfg.aux_align_corners, cfg.gradient_weight,
                     schedule if epochs is not None else None)


def _gradient_outputs(cfg: LossCfg, network: nn.Module | None) -> None:
    """``loss.gradient_weight > 0`` needs a network with gradient outputs; switch them on."""
    if cfg.gradient_weight <= 0 or network is None:
        return
    if not getattr(network, "gradient", None) or not hasattr(network, "set_gradient_outputs"):
        raise ConfigError("loss.gradient_weight: the network has no gradient reference outputs "
                          "(birefnet with model.birefnet.out_ref: true has); set it to 0")
    network.set_gradient_outputs(True)
