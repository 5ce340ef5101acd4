"""``sodkit bench memory``: one variant's training-step memory and time, measured in this process.

The command runs every variant (plain, checkpointing, amp, amp+checkpointing) in a fresh
process, so that no variant inherits another's allocator state, and reads the JSON line this
module prints. ``python -m sodkit.engine.bench_server`` (:func:`serve`) imports torch and sodkit
once and forks a child per variant it reads on stdin (the imports took 3-4 s of the 4-5 s a
small variant's own process cost); ``python -m sodkit.engine.bench CONFIG [key=value ...]
--steps N`` measures one variant. The step is the trainer's own
:class:`~sodkit.engine.step.TrainStep` on an in-memory batch of the configured input and batch
size, so only the model, precision and checkpointing differ between variants.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, TextIO

import torch

from ..config import Config, load_config
from ..errors import UserError
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
# the server's line on stderr after each variant's process ended: its exit code
DONE = "sodkit-bench-done:"


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


def serve(requests: TextIO = sys.stdin) -> None:
    """Measure each variant read from ``requests`` (a JSON line: ``config``, ``overrides``,
    ``steps``) in a child forked from this process, which has imported everything and
    allocated nothing since: every variant starts from the same interpreter state, as a fresh
    process would, without paying the imports again. The child prints the result line on stdout;
    after it ends, this process prints ``DONE <exit code>`` on stderr. Where there is no
    ``fork`` (Windows), each variant runs in a process of its own (:func:`main`)."""
    for line in requests:
        request = json.loads(line)
        argv = [request["config"], *request["overrides"], "--steps", str(request["steps"])]
        if not hasattr(os, "fork"):
            code = subprocess.call([sys.executable, "-m", "sodkit.engine.bench", *argv])
        else:
            pid = os.fork()
            if pid == 0:
                _measure_in_child(argv)
            code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        print(f"{DONE} {code}", file=sys.stderr, flush=True)


def _measure_in_child(argv: list[str]) -> NoReturn:
    """The forked child: measure, then leave without running the parent's exit handlers."""
    code = 1
    try:
        main(argv)
        code = 0
    except SystemExit as exc:  # argparse's
        code = exc.code if isinstance(exc.code, int) else 1
    except UserError as exc:  # a setting the network cannot take: its one line
        print(exc, file=sys.stderr)
    except BaseException:  # noqa: B036 - whatever ends the child is reported, then it exits
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


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
