"""One optimizer step, shared by the trainer and ``sodkit bench``.

``TrainStep(batches)`` runs ``accumulate`` micro-batches (forward under the runtime's autocast,
the criterion in float32 outside the model, backward with DDP's all-reduce only on the last one)
and one optimizer step (unscale, clip, step, zero). It returns detached loss terms that stay on
the device, and the one host-device sync is the finiteness check (``guard``): a step whose
gradients hold inf/NaN is not applied and returns a ``nonfinite`` term, so diverged weights never
reach a checkpoint. Callers reduce the terms at their log interval.

With fp16 the GradScaler skips a step whose (scaled) gradients overflow and lowers its scale; the
returned ``skipped`` term (1.0 for a skipped step, as a device tensor) lets the log count them:
a skipped step is the scaler's normal search for a scale, not a failure, and not a bad step.
Once the scale is at or below 1 the search is over (gradients that overflow unscaled are not the
scale's doing: a diverged loss keeps halving it until it gets there): from then on the guard
checks the gradients as without a scaler, and a non-finite step is ``nonfinite``, counted against
``train.max_bad_steps``. Every decision reads values that are equal on all ranks (the
all-reduced gradients, the scaler's state), so the ranks always agree. A skipped step's
BatchNorm updates are undone too (on the device, no sync) when ``restore_buffers``. Order per
step: every micro-batch's backward with the same scale (it changes only in ``update``),
``unscale_`` once, clip the true gradients, ``step`` (skipped on overflow), ``update`` once.
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
    """Network outputs (tensors in dicts / lists) in float32 at least (an fp64 run keeps its
    float64); no copy when already there."""
    if isinstance(outputs, Tensor):
        return outputs.float() if outputs.dtype in (torch.float16, torch.bfloat16) else outputs
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
        guard: bool = True,
        restore_buffers: bool = False,
        ema: Any = None,
    ) -> None:
        self.model, self.criterion, self.optimizer = model, criterion, optimizer
        self.runtime, self.accumulate, self.grad_clip = runtime, accumulate, grad_clip
        self.guard = guard  # check the gradients; skip a step whose gradients are not finite
        self.restore = guard and restore_buffers  # then also undo its BatchNorm updates
        self.ema = ema  # an engine.ema.EMA, updated after each optimizer step, or None

    def __call__(self, batches: Iterable[dict[str, Any]], keep_outputs: bool = False
                 ) -> StepOutput:
        rt, n = self.runtime, self.accumulate
        # a skipped step must not leave the BatchNorm statistics of its forward behind either
        buffers = [b.detach().clone() for b in self.model.buffers()] if self.restore else None
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
        if self._gradients_finite():
            skipped = self._optimizer_step()
            if self.ema is not None:
                self.ema.update(self.runtime.unwrap(self.model))
            if skipped is not None:
                terms["skipped"] = skipped
                if buffers is not None:  # the skipped step's forward left its statistics
                    _restore_where(skipped, self.model.buffers(), buffers)
        else:  # the weights keep their last good values; the trainer counts and decides
            self.optimizer.zero_grad(set_to_none=True)
            if buffers is not None:
                _restore_where(torch.ones(()), self.model.buffers(), buffers)
            terms["nonfinite"] = torch.ones((), device=terms["loss"].device)
        if not keep_outputs:
            batch = outputs = None
        return StepOutput(terms, images, batch, outputs)

    def _gradients_finite(self) -> bool:
        """Whether the (all-reduced, so on every rank the same) gradients are finite.

        The one host-device sync of a step. A NaN loss makes NaN gradients, so this also catches
        a loss that diverged, before it reaches the weights. With a GradScaler whose scale is
        above 1, inf/NaN is the scaler's to handle (skip, lower the scale); reading the scale
        waits for the backward pass, which the scaler's own check waits for anyway.
        """
        scaler = self.runtime.scaler
        if not self.guard or (scaler.is_enabled() and scaler.get_scale() > 1.0):
            return True
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        if not grads:
            return True
        norm = torch.nn.utils.get_total_norm(grads) if hasattr(torch.nn.utils, "get_total_norm") \
            else torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        return bool(torch.isfinite(norm))

    def _optimizer_step(self) -> Tensor | None:
        """Step; with an active GradScaler, 1.0 if it skipped the step (its scale went down)."""
        scaler = self.runtime.scaler
        scale = getattr(scaler, "_scale", None) if scaler.is_enabled() else None
        before = scale.clone() if scale is not None else None
        self.runtime.optimizer_step(self.optimizer, self.model, self.grad_clip)
        if before is None:
            return None
        return (scaler._scale < before).float()


@torch.no_grad()
def _restore_where(flag: Tensor, current: Iterable[Tensor], saved: list[Tensor]) -> None:
    """Put ``saved`` back into ``current`` where the 0-d ``flag`` is non-zero, on the device."""
    for buffer, old in zip(current, saved, strict=True):
        buffer.copy_(torch.where(flag.to(buffer.device).bool(), old, buffer))
