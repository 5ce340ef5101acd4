"""How many images ``sodkit predict`` and the Python API put in one forward pass by default:
chosen from the memory one image costs at the network's input size and the memory there is.

The default used to be 8 whatever the size: BiRefNet at 1024 px then peaked at 7.7 GB on the
CPU, where one image at a time needed 2.9 GB and was barely slower (#33). Now:

* :func:`forward_memory` measures what one image's forward pass allocates, with a probe: the
  network run on one random image at a fraction of the input side (:func:`probe_side`: 1024
  px -> 128), the peak of the bytes in use
  sampled after every operator, scaled by the area and by :data:`RESIDENT_SLACK` (what the
  samples miss: temporaries inside an operator, the allocator's rounding). Activations grow
  with the area (BiRefNet Swin-T, torch's allocator: 22 MiB at 128 px, 89 at 256, 358 at
  512); measured against the resident memory of real batches at 1024 px (1.5 GiB an image):
  benchmarks/RESULTS.md, "Memory of sodkit predict". What one image costs at its own
  resolution (the original kept for a cut-out, the probability map) is added by the
  caller. The probe runs the network twice at its small side, once to warm it up (one-time
  allocations are not per image): at 1024 px, about 3% of a forward pass. On CUDA the probe
  is one pass at the full side, measured by torch's allocator, and the budget is the GPU's
  free memory. Where the probe could not change the outcome (:func:`worth_probing`: a batch
  at a generous 4 KiB a pixel fits anyway, as at 320 px with 16 GiB free) it is not run.
* :func:`choose_batch`: at most :data:`MAX_BATCH`; the batch's memory at most half the budget
  (:func:`sodkit.limits.memory_budget`: the memory available, or ``SODKIT_MAX_MEMORY_MB``);
  on the CPU at most :data:`CPU_BATCH_PIXELS` input pixels a batch, beyond which batching
  brings no speed there (measured: benchmarks/RESULTS.md). A batch given by the user is kept,
  and refused in one line, before any work, when its memory exceeds the budget.
"""

from __future__ import annotations

import ctypes
import logging
import math
import platform
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..limits import check_memory, gib, memory_budget

logger = logging.getLogger(__name__)

MAX_BATCH = 8  # the default batch's upper bound (the default before it depended on memory)
CPU_BATCH_PIXELS = 1 << 20  # input pixels per batch on the CPU: 8 images at 362 px, 1 at 1024
# no network here needs more than about 1.1 KiB of activations per input pixel (BiRefNet Swin-T
# at 1024 px: 1.1 GiB an image); where a batch fits at 4 KiB a pixel, the probe is not run
GENEROUS_BYTES_PER_PIXEL = 4096
# what a batch image adds to the resident memory, per byte the probe counts (intra-operator
# temporaries between two samples, the allocator's rounding): BiRefNet Swin-T at 1024 px, 1.1
# GiB probed, 1.5 GiB measured from batch 1 to 2 to 4 (benchmarks/RESULTS.md)
RESIDENT_SLACK = 1.4
MIN_PROBE_SIDE = 128  # the probe's side: the input side halved, not below this (at smaller
# sides fixed costs would count as per-image ones)


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


def probe_side(size: int) -> int:
    """The side the probe runs at: ``size`` halved while the half is a multiple of 32 (what
    every network takes) and at least :data:`MIN_PROBE_SIDE`: 1024 -> 128, 320 -> 160;
    ``size`` itself when it cannot be halved so (a small side costs little anyway)."""
    side = size
    while side // 2 >= MIN_PROBE_SIDE and (side // 2) % 32 == 0:
        side //= 2
    return side


def forward_memory(run: Callable[[torch.Tensor], object], size: int, device: torch.device
                   ) -> int | None:
    """Bytes one image adds to a forward pass at ``size`` x ``size``: ``run(batch)`` is the
    forward pass (in eval mode, without gradients). None where it cannot be measured (a CPU
    allocator other than glibc's)."""
    if device.type == "cuda":
        return _cuda_memory(run, size, device)
    counter = _heap_in_use()
    if counter is None:
        return None
    side = probe_side(size)
    probe = torch.randn(1, 3, side, side, device=device)
    run(probe)  # warm-up: one-time allocations (kernels, pools) are not per image
    with _PeakInUse(counter) as peak:
        run(probe)
    return math.ceil(peak.added * (size / side) ** 2 * RESIDENT_SLACK)


def _cuda_memory(run: Callable[[torch.Tensor], object], size: int, device: torch.device) -> int:
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    run(torch.randn(1, 3, size, size, device=device))
    torch.cuda.synchronize(device)
    return max(torch.cuda.max_memory_allocated(device) - before, 1)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _heap_in_use() -> Callable[[], int] | None:
    """Bytes the process's allocations hold now, every arena and mapping (glibc's
    ``mallinfo2``: what torch's CPU tensors are allocated from); None elsewhere."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):  # glibc before 2.33
        return None
    mallinfo2.restype = _MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use


class _PeakInUse(TorchDispatchMode):
    """The peak of ``counter()`` after every tensor operation inside it, minus its value at the
    start (``added``): what the operations' results held at most at once."""

    def __init__(self, counter: Callable[[], int]) -> None:
        super().__init__()
        self.counter = counter
        self.start = self.peak = 0

    @property
    def added(self) -> int:
        return max(self.peak - self.start, 0)

    def __enter__(self) -> _PeakInUse:
        self.start = self.peak = self.counter()
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, self.counter())
        return out


def budget_of(device: torch.device) -> tuple[int | None, str, bool]:
    """``(bytes, what they are, set by the user)`` a batch may use: a GPU's free memory, else
    :func:`sodkit.limits.memory_budget`."""
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
        return free, f"the {gib(free)} free on {device}", False
    budget, described = memory_budget()
    return budget, described, "SODKIT_MAX_MEMORY_MB" in described


def worth_probing(size: int, device: torch.device, given: int | None) -> bool:
    """Whether the probe could change the batch or refuse it: not where the batch (``given``,
    or :data:`MAX_BATCH`) at :data:`GENEROUS_BYTES_PER_PIXEL` fits half the budget (sides up
    to about 320 px on a machine with 16 GiB free: the probe's two forward passes are then
    saved, a third of ``sodkit predict``'s fixed cost at 160 px)."""
    budget = budget_of(device)[0]
    return budget is not None and (
        (given or MAX_BATCH) * size * size * GENEROUS_BYTES_PER_PIXEL > budget // 2)


def choose_batch(per_image: int | None, size: int, device: torch.device, given: int | None,
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
