"""Measuring a training step's memory: bytes saved for backward, and the process's peak.

- :class:`SavedTensors` counts the tensors autograd keeps for backward with
  ``torch.autograd.graph.saved_tensors_hooks``, once per storage (views and tensors saved by two
  ops count once), leaving out the model's parameters and buffers (resident anyway). Inside a
  non-reentrant checkpoint segment checkpoint's own hooks take over, so what is counted is what
  the step really keeps: the segments' inputs (saved through the outer hooks) and everything
  outside segments. The figure depends on the model, batch and precision, not on the machine.
- :class:`PeakMemory` measures what a step adds on top of what is resident before it: on CUDA
  ``max_memory_allocated`` minus ``memory_allocated``; on the CPU the peak resident set size
  (``VmHWM``, reset through ``/proc/self/clear_refs``) minus the resident size before. glibc
  keeps freed heap memory unless told otherwise, so the measured process must run with
  ``MALLOC_MMAP_THRESHOLD_=65536`` (:data:`CPU_MEMORY_ENV`): larger blocks are then mapped and
  unmapped on free, and the resident size follows the live tensors.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

CPU_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
MB = 2**20


class SavedTensors:
    """Context manager: ``nbytes`` of the unique storages saved for backward inside it."""

    def __init__(self, model: nn.Module | None = None) -> None:
        resident = list(model.parameters()) + list(model.buffers()) if model is not None else []
        self._skip = {_storage_key(t) for t in resident}
        self.storages: dict[Any, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, tensor: Tensor) -> Tensor:
        key = _storage_key(tensor)
        if key is not None and key not in self._skip:
            self.storages[key] = tensor.untyped_storage().nbytes()
        return tensor

    @property
    def nbytes(self) -> int:
        return sum(self.storages.values())

    def __enter__(self) -> SavedTensors:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)


def _unpack(tensor: Tensor) -> Tensor:
    return tensor


def _storage_key(tensor: Tensor) -> tuple[str, int] | None:
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # sparse, meta or exotic subclasses
        return None
    if storage.nbytes() == 0:
        return None
    return str(tensor.device), storage.data_ptr()


def _proc_status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


class PeakMemory:
    """``with PeakMemory(device) as peak: step()`` -> ``peak.added_bytes``."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.added_bytes = 0  # peak during the block minus what was resident before it
        self.peak_bytes = 0  # the peak itself (CUDA: allocated by torch; CPU: resident set)

    def __enter__(self) -> PeakMemory:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._before = torch.cuda.memory_allocated(self.device)
        else:
            Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            self._before = _proc_status_kb("VmRSS") * 1024
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            peak = _proc_status_kb("VmHWM") * 1024
        self.peak_bytes = peak
        self.added_bytes = max(peak - self._before, 0)


class AllocatedPeak:
    """``with AllocatedPeak() as peak: step()`` -> ``peak.added_bytes``: the exact peak of the
    bytes torch's allocator handed out during the block, minus those live when it began.

    The allocator's running total comes from ``torch.profiler``'s allocation events
    (``profile_memory``), on the CPU as on CUDA, so the figure needs neither
    ``MALLOC_MMAP_THRESHOLD_`` nor a fresh process and is the same on every run: what
    :class:`PeakMemory` measures from outside (resident pages), without the allocator's and the
    libraries' noise. Tests compare steps with it; ``sodkit bench`` keeps reporting what a user
    observes (:class:`PeakMemory`). Tensors that existed before the block and are freed inside
    it make ``added_bytes`` smaller, as they would the user's peak.
    """

    def __init__(self) -> None:
        self.added_bytes = 0

    def __enter__(self) -> AllocatedPeak:
        from torch.profiler import ProfilerActivity, profile

        gc.collect()
        self._profile = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self._profile.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        from torch._C._profiler import _EventType

        self._profile.__exit__(*exc)
        events = list(self._profile.profiler.kineto_results.experimental_event_tree())
        allocations = []
        while events:
            event = events.pop()
            events.extend(event.children)
            if event.tag == _EventType.Allocation:
                allocations.append(event)
        allocations.sort(key=lambda e: e.start_time_ns)
        if not allocations:
            return
        first = allocations[0].extra_fields
        start = first.total_allocated - first.alloc_size  # live before the first event
        peak = max(e.extra_fields.total_allocated for e in allocations)
        self.added_bytes = max(peak - start, 0)
