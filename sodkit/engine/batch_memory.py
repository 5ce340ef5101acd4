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
* :func:`~sodkit.engine.batch_choice.choose_batch` (importable without torch): at most
  :data:`MAX_BATCH`; the batch's memory at most half the budget
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

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .batch_choice import (  # noqa: F401 - their home before
    CPU_BATCH_PIXELS,
    GENEROUS_BYTES_PER_PIXEL,
    MAX_BATCH,
    BatchChoice,
    budget_of,
    choose_batch,
    worth_probing,
)

logger = logging.getLogger(__name__)

# what a batch image adds to the resident memory, per byte the probe counts (intra-operator
# temporaries between two samples, the allocator's rounding): BiRefNet Swin-T at 1024 px, 1.1
# GiB probed, 1.5 GiB measured from batch 1 to 2 to 4 (benchmarks/RESULTS.md)
RESIDENT_SLACK = 1.4
MIN_PROBE_SIDE = 128  # the probe's side: the input side halved, not below this (at smaller
# sides fixed costs would count as per-image ones)


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
