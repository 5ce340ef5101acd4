"""Exponential moving average of a network's weights (``train.ema_decay``).

After each optimizer step every floating-point entry of the state dict (parameters and
BatchNorm statistics alike, as timm's ``ModelEmaV3`` and ``AveragedModel(use_buffers=True)``
do) moves towards the trained model's: ``ema = d * ema + (1 - d) * model``; integer buffers
(``num_batches_tracked``) are copied. The effective decay warms up as
``min(decay, (1 + n) / (10 + n))`` after ``n`` updates, so a short run's average is not
dominated by the random initial weights.

The average is a plain copy of the (unwrapped) network in eval mode, with no gradients: the
trainer evaluates it and saves it under the checkpoint's ``ema`` key, as tensors and numbers.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn


class EMA:
    """The averaged copy of ``model`` and its update rule."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"train.ema_decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.updates = 0
        self.module = copy.deepcopy(model).eval().requires_grad_(False)

    def current_decay(self) -> float:
        """The decay of the next update (warmed up over the first updates)."""
        return min(self.decay, (1.0 + self.updates) / (10.0 + self.updates))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Move the average towards ``model`` (the unwrapped network) after an optimizer step."""
        d = self.current_decay()
        current = model.state_dict()
        for key, avg in self.module.state_dict().items():
            new = current[key].detach()
            if avg.is_floating_point():
                avg.lerp_(new.to(avg.dtype), 1.0 - d)
            else:
                avg.copy_(new)
        self.updates += 1

    @torch.no_grad()
    def reset(self, model: nn.Module) -> None:
        """Start the average again from ``model``'s weights (e.g. resuming a run without EMA)."""
        self.module.load_state_dict(model.state_dict())
        self.updates = 0

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "updates": self.updates, "model": self.module.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state["model"])
        self.updates = int(state["updates"])
