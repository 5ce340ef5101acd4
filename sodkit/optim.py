"""Optimizer with backbone / decoder and decay / no-decay parameter groups, and per-step schedules.

The schedule is a multiplicative factor on each group's own base LR (``LambdaLR``), so the
backbone's ``lr * backbone_lr_factor`` ratio holds at every step, warm-up included.
"""

from __future__ import annotations

import bisect
import logging
import math
import warnings
from collections.abc import Callable

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR, LRScheduler

from .config.ranges import check_ranges
from .config.schema import OptimCfg, ScheduleCfg
from .errors import ConfigError

log = logging.getLogger(__name__)

OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "poly", "cosine", "step", "triangular")
INTERVALS = ("step", "epoch")


def scaled_lr(cfg: OptimCfg, global_batch_size: int) -> float:
    """``cfg.lr`` scaled by ``global_batch_size / cfg.base_batch_size`` (none, linear or sqrt)."""
    ratio = global_batch_size / cfg.base_batch_size
    if cfg.lr_scaling == "none":
        return cfg.lr
    if cfg.lr_scaling == "linear":
        return cfg.lr * ratio
    if cfg.lr_scaling == "sqrt":
        return cfg.lr * math.sqrt(ratio)
    raise ConfigError(f"optim.lr_scaling: {cfg.lr_scaling!r} is not one of none, linear, sqrt")


def param_groups(model: nn.Module, lr: float, cfg: OptimCfg) -> list[dict]:
    """Named groups: backbone / decoder x decay / no_decay (and backbone layers with
    ``layer_decay``); empty ones are dropped.

    Parameters with ``ndim <= 1`` (biases, norm scales and shifts) get no weight decay: decaying
    them only shrinks normalisation towards zero; nor do the tensors a timm encoder lists in
    ``no_weight_decay`` (position embeddings, class / register tokens). ``cfg.decay_all``
    decays them too (F3Net's released code does; MINet's skips biases and the BatchNorms its
    names mark ``bn``). Frozen parameters are left out. ``cfg.layer_decay``: the backbone's
    learning rate scaled per layer as timm's ``param_groups_layer_decay`` scales it
    (:mod:`sodkit.backbone.layer_decay`), one group pair ``backbone_layer<k>`` per scale below 1
    (k = 0 for the lowest scale, the patch embedding); the top layers stay in ``backbone``.
    """
    inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    backbone = getattr(inner, "backbone", None)
    # the pretrained encoder (a plain ViT's new pyramid, outside .body, learns at the decoder's lr)
    encoder = getattr(backbone, "body", backbone)
    backbone_ids = {id(p) for p in encoder.parameters()} if encoder is not None else set()
    if backbone is None and cfg.backbone_lr_factor != 1.0:
        log.warning("%s has no .backbone: optim.backbone_lr_factor is ignored",
                    type(inner).__name__)
    rules = backbone.param_rules(cfg.layer_decay) if hasattr(backbone, "param_rules") else {}
    base = {"backbone": lr * cfg.backbone_lr_factor, "decoder": lr}
    groups: dict[str, dict] = {}
    for name in ("backbone", "decoder"):  # the plain groups first, in the usual order
        for suffix, decay in (("", cfg.weight_decay), ("_no_decay", 0.0)):
            groups[name + suffix] = {"name": name + suffix, "params": [], "lr": base[name],
                                     "weight_decay": decay}
    layers = _layer_ids({scale for scale, _ in rules.values()})
    for param in model.parameters():  # unique: parameters() skips shared duplicates
        if not param.requires_grad:
            continue
        key = "backbone" if id(param) in backbone_ids else "decoder"
        scale, decayed = rules.get(id(param), (1.0, param.ndim > 1))
        if scale != 1.0:  # optim.layer_decay: one group per timm layer below the top
            key = f"backbone_layer{layers[scale]}"
            for suffix, decay in (("", cfg.weight_decay), ("_no_decay", 0.0)):
                groups.setdefault(key + suffix, {"name": key + suffix, "params": [],
                                                 "lr": base["backbone"] * scale,
                                                 "weight_decay": decay})
        groups[key if decayed or cfg.decay_all else key + "_no_decay"]["params"].append(param)
    return [g for g in groups.values() if g["params"]]


def _layer_ids(scales: set[float]) -> dict[float, int]:
    """timm's layer id of each lr scale below 1: 0 for the lowest (the patch embedding)."""
    return {scale: i for i, scale in enumerate(sorted(s for s in scales if s != 1.0))}


def build_optimizer(
    model: nn.Module, cfg: OptimCfg, global_batch_size: int
) -> torch.optim.Optimizer:
    """SGD / Adam / AdamW over :func:`param_groups`, with the LR scaling rule applied."""
    lr = scaled_lr(cfg, global_batch_size)
    groups = param_groups(model, lr, cfg)
    if not groups:
        raise ValueError("the model has no trainable parameters")
    log.info("optimizer %s: lr %.3g (%s scaling, global batch %d / base %d), backbone lr %.3g",
             cfg.name, lr, cfg.lr_scaling, global_batch_size, cfg.base_batch_size,
             lr * cfg.backbone_lr_factor)
    for group in groups:
        log.info("  group %s: lr %.3g, weight decay %.3g, %d tensors", group["name"], group["lr"],
                 group["weight_decay"], len(group["params"]))
    if cfg.name == "sgd":
        if cfg.nesterov and cfg.momentum <= 0:
            raise ConfigError("optim.nesterov: needs optim.momentum > 0")
        return torch.optim.SGD(groups, lr=lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
    if cfg.name in ("adam", "adamw"):
        cls = torch.optim.Adam if cfg.name == "adam" else torch.optim.AdamW
        return cls(groups, lr=lr, betas=(cfg.betas[0], cfg.betas[1]))
    raise ConfigError(f"optim.name: {cfg.name!r} is not one of {', '.join(OPTIMIZERS)}")


def lr_factor_fn(
    cfg: ScheduleCfg, steps_per_epoch: int, epochs: int
) -> Callable[[int], float]:
    """The LR multiplier at optimizer step ``i`` (0-based): warm-up factor x main schedule.

    ``cfg.interval == "epoch"``: the schedule below with one unit per epoch, evaluated at the
    epoch index ``i // steps_per_epoch`` (the LR is constant within an epoch, as in MINet's and
    F3Net's code); otherwise one unit per step.
    """
    _check_schedule(cfg, steps_per_epoch, epochs)
    if cfg.interval == "epoch":
        per_epoch = _unit_factor_fn(cfg, 1, epochs)
        return lambda step: per_epoch(step // steps_per_epoch)
    return _unit_factor_fn(cfg, steps_per_epoch, epochs)


def _unit_factor_fn(cfg: ScheduleCfg, units_per_epoch: int, epochs: int
                    ) -> Callable[[int], float]:
    """Warm-up rises linearly from ``warmup_factor`` (unit 0) to 1 (unit ``W``,
    ``W = round(warmup_epochs * units_per_epoch)``). Poly and cosine run from 1 at unit ``W`` to
    ``min_lr_factor`` at unit ``N = epochs * units_per_epoch``; step decays by ``gamma`` at each
    milestone (absolute epochs, converted to units; -M: M epochs before the end); triangular is
    F3Net's ``1 - |2 (u + 1) / (N' + 1) - 1|`` over the ``N' = N - W`` units after warm-up ``u``.
    """
    warmup = round(cfg.warmup_epochs * units_per_epoch)
    total = epochs * units_per_epoch
    span = max(total - warmup, 1)
    # a negative milestone -N: N epochs before the end (BiRefNet's lr_decay_epochs; its
    # MultiStepLR milestone epochs - N + 1 decays the last N - 1 epochs, ours the last N)
    milestones = sorted(round((m if m >= 0 else max(epochs + m, 0)) * units_per_epoch)
                        for m in cfg.milestones)
    start, floor = cfg.warmup_factor, cfg.min_lr_factor

    def factor(unit: int) -> float:
        warm = start + (1.0 - start) * unit / warmup if unit < warmup else 1.0
        after = max(unit - warmup, 0)
        t = min(after / span, 1.0)
        if cfg.name == "poly":
            main = floor + (1.0 - floor) * (1.0 - t) ** cfg.power
        elif cfg.name == "cosine":
            main = floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * t))
        elif cfg.name == "step":
            main = cfg.gamma ** bisect.bisect_right(milestones, unit)
        elif cfg.name == "triangular":
            main = max(1.0 - abs(2.0 * (after + 1) / (span + 1) - 1.0), 0.0)
        else:
            main = 1.0
        return warm * main

    return factor


def _check_schedule(cfg: ScheduleCfg, steps_per_epoch: int, epochs: int) -> None:
    if cfg.name not in SCHEDULES:
        raise ConfigError(f"schedule.name: {cfg.name!r} is not one of {', '.join(SCHEDULES)}")
    if cfg.interval not in INTERVALS:
        raise ConfigError(f"schedule.interval: {cfg.interval!r} is not one of "
                          f"{', '.join(INTERVALS)}")
    if steps_per_epoch <= 0 or epochs <= 0:
        raise ValueError(f"steps_per_epoch ({steps_per_epoch}) and epochs ({epochs}) must be > 0")
    check_ranges(cfg, "schedule.", ConfigError)  # a ScheduleCfg built in code, not loaded


def build_scheduler(
    optimizer: torch.optim.Optimizer, cfg: ScheduleCfg, steps_per_epoch: int, epochs: int
) -> LRScheduler:
    """A ``LambdaLR`` to step once per optimizer step (not per batch under accumulation).

    ``steps_per_epoch`` counts optimizer steps. Its state_dict (step count and each group's base
    LR) resumes exactly; the factor function is rebuilt from the config, not stored. A per-epoch
    schedule (``schedule.interval: epoch``) is stepped the same way: its factor function holds
    the LR constant within each epoch, so a resume in mid-epoch needs nothing else.
    """
    return PerStepLR(optimizer, lr_factor_fn(cfg, steps_per_epoch, epochs))


class PerStepLR(LambdaLR):
    """``LambdaLR`` whose ``load_state_dict`` also sets each group's LR for the restored step.

    Plain ``LambdaLR`` leaves the LR that its constructor wrote (the step-0 value) in place when
    the optimizer state was loaded *before* the scheduler was built; recomputing the closed form
    ``base_lr * factor(step)`` makes resume exact in either order.
    """

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        pairs = zip(self.base_lrs, self.lr_lambdas, strict=True)
        lrs = [base * fn(self.last_epoch) for base, fn in pairs]
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=True):
            group["lr"] = lr
        self._last_lr = lrs


def step_scheduler(scheduler: LRScheduler) -> None:
    """One schedule step per training step, taken or not.

    A GradScaler that skips the first step (an fp16 scale search) leaves ``optimizer.step()``
    uncalled, and PyTorch then warns that the scheduler stepped first and "skips the first value
    of the schedule". sodkit's schedule counts training steps on purpose (a skipped step is
    still a step of the run, on every rank alike), so the warning is wrong here and silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)` "
                                r"before `optimizer\.step\(\)`", category=UserWarning)
        scheduler.step()
