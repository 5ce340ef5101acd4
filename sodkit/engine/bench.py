"""``sodkit bench memory``: one variant's training-step memory and time, measured in this process.

The command runs every variant (plain, checkpointing, amp, amp+checkpointing) in a fresh
process, ``python -m sodkit.engine.bench CONFIG [key=value ...] --steps N``, so that no variant
inherits another's allocator state, and reads the JSON line this module prints. The step is the
trainer's own :class:`~sodkit.engine.step.TrainStep` on an in-memory batch of the configured
input and batch size, so only the model, precision and checkpointing differ between variants.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from ..config import Config, load_config
from ..loss import build_criterion
from ..network import build_network
from ..optim import build_optimizer
from .memory import MB, PeakMemory, SavedTensors
from .runtime import Runtime
from .step import TrainStep

logger = logging.getLogger(__name__)


def random_batch(cfg: Config, device: torch.device, seed: int = 0) -> dict[str, torch.Tensor]:
    """A training batch of the configured shape: normal images, binary masks."""
    g = torch.Generator().manual_seed(seed)
    size, batch = cfg.data.size, cfg.data.batch_size
    return {"image": torch.randn(batch, 3, size, size, generator=g).to(device),
            "mask": (torch.rand(batch, 1, size, size, generator=g) > 0.5).float().to(device)}


def build_train_step(cfg: Config) -> tuple[TrainStep, Runtime]:
    """Model, criterion, optimizer and runtime of ``cfg``, without data loaders."""
    runtime = Runtime(cfg.runtime)
    net = build_network(cfg.model)
    criterion = build_criterion(cfg.loss, net).to(runtime.device)
    model = runtime.wrap(net).train()
    optimizer = build_optimizer(runtime.unwrap(model), cfg.optim, cfg.data.batch_size)
    step = TrainStep(model, criterion, optimizer, runtime, 1, cfg.train.grad_clip)
    return step, runtime


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# a line on stderr per stage of a variant, which ``sodkit bench memory`` turns into its progress
PROGRESS = "sodkit-bench-progress:"


def _done(stage: str) -> None:
    print(f"{PROGRESS} {stage}", file=sys.stderr, flush=True)


def measure_memory(cfg: Config, steps: int, progress: Callable[[str], None] | None = None
                   ) -> dict[str, Any]:
    """Peak memory added by a step, bytes saved for backward, median step time (after warm-up).
    ``progress(stage)`` is called after the network is built and after every step."""
    progress = progress or (lambda stage: None)
    step, runtime = build_train_step(cfg)
    progress("built")
    device = runtime.device
    batch = random_batch(cfg, device)
    step([batch])  # warm-up: optimizer state, allocator caches, kernel selection
    progress("warm-up step")
    peaks, totals, times = [], [], []
    saved = SavedTensors(runtime.unwrap(step.model))
    for i in range(steps):
        # the last step also counts what it saves for backward (the hooks hold no tensor), so
        # that a 1024 px variant costs 1 + steps steps, not one more
        with PeakMemory(device) as peak, saved if i == steps - 1 else contextlib.nullcontext():
            start = time.perf_counter()
            step([batch])
            _synchronize(device)
            times.append(time.perf_counter() - start)
        peaks.append(peak.added_bytes)
        totals.append(peak.peak_bytes)
        progress(f"step {i + 1}/{steps}")
    return {"peak_mb": max(peaks) / MB, "saved_mb": saved.nbytes / MB,
            "peak_total_mb": max(totals) / MB, "rank": runtime.rank,
            "step_s": statistics.median(times), "steps": steps, "device": str(device),
            "precision": cfg.runtime.precision, "checkpointing": cfg.model.checkpointing}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="one bench-memory variant (JSON on stdout)")
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cfg = load_config(args.config, args.overrides)
    print(json.dumps(measure_memory(cfg, args.steps, _done)), flush=True)


if __name__ == "__main__":
    main()
