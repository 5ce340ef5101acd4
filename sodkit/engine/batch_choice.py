"""The batch of a forward pass, from the memory one image costs (:mod:`sodkit.engine.
batch_memory` measures it) and the memory there is: the rules of the default, and a batch the
user gave checked against the budget. Light (torch only for a GPU's free memory), so that
``sodkit predict``'s start without torch (:mod:`sodkit.commands.predict_lean`) chooses the
batch as the full path does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..limits import check_memory, gib, memory_budget

MAX_BATCH = 8  # the default batch's upper bound (the default before it depended on memory)
CPU_BATCH_PIXELS = 1 << 20  # input pixels per batch on the CPU: 8 images at 362 px, 1 at 1024
# no network here needs more than about 1.1 KiB of activations per input pixel (BiRefNet Swin-T
# at 1024 px: 1.1 GiB an image); where a batch fits at 4 KiB a pixel, the probe is not run
GENEROUS_BYTES_PER_PIXEL = 4096


@dataclass(frozen=True)
class BatchChoice:
    """The batch a forward pass takes, and what it was chosen from (for the opening line)."""

    batch: int
    per_image: int | None  # bytes one image adds to a forward pass; None: not measured
    budget: int | None  # bytes there are (see sodkit.limits.memory_budget); None: unknown
    given: bool  # the user's (--batch-size, batch_size=) rather than chosen
    limited: bool = False  # the budget is SODKIT_MAX_MEMORY_MB's, not the memory available

    def describe(self) -> str:
        """``batch 2 (about 310 MiB an image, 18.2 GiB available)``, or ``batch 8 (given)``."""
        if self.given:
            return f"batch {self.batch} (given)"
        parts = [f"about {gib(self.per_image)} an image"] if self.per_image else []
        if self.budget is not None:
            parts.append(f"{gib(self.budget)} {'allowed' if self.limited else 'available'}")
        return f"batch {self.batch}" + (f" ({', '.join(parts)})" if parts else "")


def budget_of(device: Any) -> tuple[int | None, str, bool]:
    """``(bytes, what they are, set by the user)`` a batch may use: a GPU's free memory, else
    :func:`sodkit.limits.memory_budget`."""
    if device.type == "cuda":
        import torch

        free = torch.cuda.mem_get_info(device)[0]
        return free, f"the {gib(free)} free on {device}", False
    budget, described = memory_budget()
    return budget, described, "SODKIT_MAX_MEMORY_MB" in described


def worth_probing(size: int, device: Any, given: int | None) -> bool:
    """Whether the probe could change the batch or refuse it: not where the batch (``given``,
    or :data:`MAX_BATCH`) at :data:`GENEROUS_BYTES_PER_PIXEL` fits half the budget (sides up
    to about 320 px on a machine with 16 GiB free: the probe's two forward passes are then
    saved, a third of ``sodkit predict``'s fixed cost at 160 px)."""
    budget = budget_of(device)[0]
    return budget is not None and (
        (given or MAX_BATCH) * size * size * GENEROUS_BYTES_PER_PIXEL > budget // 2)


def choose_batch(per_image: int | None, size: int, device: Any, given: int | None,
                 what: str = "--batch-size", fixed: int = 0, known: int = 0) -> BatchChoice:
    """The batch of a forward pass at ``size``: ``given`` (the user's) if its memory fits the
    budget, else a UserError naming ``what``; None: the default (the module's rules).
    ``per_image``: bytes one image adds to the forward pass (the probe's; None: not
    measured); ``known``: bytes each image of a batch costs besides, known without a probe
    (its original kept for a cut-out, in every batch in flight); ``fixed``: bytes needed
    beside the batch whatever its size (a foreground estimate)."""
    budget, described, limited = budget_of(device)
    gpu = (budget, described) if device.type == "cuda" else None
    unit = (per_image or 0) + known
    if given is not None:
        if unit:
            check_memory(fixed + given * unit, f"{what} {given} at {size} px",
                         f"lower {what} (1 needs about {gib(fixed + unit)}) or the input "
                         f"side", gpu)
        return BatchChoice(given, unit or None, budget, True, limited)
    if unit:
        check_memory(fixed + unit, f"one image at {size} px",
                     "lower the input side (--size), or give smaller photos", gpu)
    batch = MAX_BATCH
    if device.type != "cuda":
        batch = min(batch, max(1, CPU_BATCH_PIXELS // (size * size)))
    if unit and budget is not None:
        batch = min(batch, max(1, (budget // 2 - fixed) // unit))
    return BatchChoice(batch, unit or None, budget, False, limited)
