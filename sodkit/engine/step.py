"""One optimizer step, shared by the trainer and ``sodkit bench``.

``TrainStep(batches)`` runs ``accumulate`` micro-batches (forward under the runtime's autocast,
the criterion in float32 outside the model, backward with DDP's all-reduce only on the last one)
and one optimizer step (unscale, clip, step, zero). It returns detached loss terms that stay on
the device: nothing in it waits for the device (no ``.item()``, no ``.cpu()``), so the host can
queue the next step while the device works; callers reduce the terms at their log interval.

With fp16 the GradScaler skips a step whose gradients hold inf/NaN and lowers its scale; the
returned ``skipped`` term (1.0 for a skipped step, as a device tensor) lets the log count them:
a skipped step is the scaler's normal search for a scale, not a failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from .runtime import Runtime


@dataclass
class StepOutput:
    """What one optimizer step returns; ``terms`` are means over its micro-batches."""

    terms: dict[str, Tensor]  # "loss", the criterion's parts, "skipped" (fp16 only); detached
    images: int  # images this process trained on in the step
    batch: dict[str, Any] | None = None  # last micro-batch and outputs, when keep_outputs
    outputs: dict[str, Any] | None = field(default=None, repr=False)


def to_float32(outputs: Any) -> Any:
    """Network outputs (tensors in dicts / lists) in float32; no copy when already float32."""
    if isinstance(outputs, Tensor):
        return outputs.float() if outputs.is_floating_point() else outputs
    if isinstance(outputs, dict):
        return {k: to_float32(v) for k, v in outputs.items()}
    if isinstance(outputs, (list, tuple)):
        return type(outputs)(to_float32(v) for v in outputs)
    return outputs


class TrainStep:
    """Callable ``(micro-batches) -> StepOutput``: one optimizer step of ``model``."""

    def __init__(
        self,
        model: nn.Module,
        criterion: Any,
        optimizer: torch.optim.Optimizer,
        runtime: Runtime,
        accumulate: int = 1,
        grad_clip: float | None = None,
        ema: Any = None,
    ) -> None:
        self.model, self.criterion, self.optimizer = model, criterion, optimizer
        self.runtime, self.accumulate, self.grad_clip = runtime, accumulate, grad_clip
        self.ema = ema  # an engine.ema.EMA, updated after each optimizer step, or None

    def __call__(self, batches: Iterable[dict[str, Any]], keep_outputs: bool = False
                 ) -> StepOutput:
        rt, n = self.runtime, self.accumulate
        terms: dict[str, Tensor] = {}
        images = micro = 0
        batch = outputs = None
        for micro, batch in enumerate(batches, start=1):
            batch = rt.to_device(batch)
            with rt.accumulation_context(self.model, sync=micro == n):
                with rt.autocast():
                    outputs = self.model(batch["image"])
                loss, parts = self.criterion(to_float32(outputs), batch["mask"])
                rt.backward(loss / n)
            for key, value in {"loss": loss, **parts}.items():
                value = value.detach().float() / n
                terms[key] = terms[key] + value if key in terms else value
            images += batch["image"].shape[0]
        if micro != n:
            raise ValueError(f"an optimizer step needs {n} micro-batches, got {micro}")
        skipped = self._optimizer_step()
        if self.ema is not None:
            self.ema.update(self.runtime.unwrap(self.model))
        if skipped is not None:
            terms["skipped"] = skipped
        if not keep_outputs:
            batch = outputs = None
        return StepOutput(terms, images, batch, outputs)

    def _optimizer_step(self) -> Tensor | None:
        """Step; with an active GradScaler, 1.0 if it skipped the step (its scale went down)."""
        scaler = self.runtime.scaler
        scale = getattr(scaler, "_scale", None) if scaler.is_enabled() else None
        before = scale.clone() if scale is not None else None
        self.runtime.optimizer_step(self.optimizer, self.model, self.grad_clip)
        if before is None:
            return None
        return (scaler._scale < before).float()
