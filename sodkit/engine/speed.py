"""``sodkit bench speed``: images/s of each part of training, and which part limits the loop.

Four measurements on the config as it would train (same loaders, workers, threads, model):

- ``loader``: batches from the training DataLoader alone (decode, augment, collate);
- ``step``: :class:`~sodkit.engine.step.TrainStep` on an in-memory batch (no loader);
- ``loop``: the trainer's own epoch loop (``Trainer._train_epoch``) with the real loader,
  starting a fresh loader iterator as every epoch does;
- ``eval``: :func:`~sodkit.engine.evaluator.evaluate` over the test sets (inference, resizing
  to the GT, metrics), without writing files.

Each runs a warm-up first (worker start, allocations, the optimizer's state); loader, step and
loop then run in interleaved rounds (medians reported), so that load from other processes hits
them alike. The loop cannot be faster than the slower of loader and step; the report names it.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..config import Config
from ..data import build_train_loader
from ..resources import resolve_workers
from .bench import build_train_step, random_batch
from .logging import Throughput
from .preemption import StopRequest

logger = logging.getLogger(__name__)


def _rate(images: int, seconds: float) -> float:
    return images / max(seconds, 1e-9)


def _timed_batches(loader: Any, steps: int) -> float:
    """images/s of ``steps`` batches from a fresh iterator, after its first batch."""
    batches = iter(loader)
    next(batches)  # workers (re)started, first batch done
    start, images = time.perf_counter(), 0
    for _ in range(min(steps, len(loader) - 1)):
        images += next(batches)["image"].shape[0]
    return _rate(images, time.perf_counter() - start)


def _timed_steps(step: Any, batch: dict, steps: int, device: torch.device) -> float:
    start = time.perf_counter()
    images = sum(step([batch]).images for _ in range(steps))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return _rate(images, time.perf_counter() - start)


def _timed_loop(trainer: Any, steps: int) -> float:
    """The trainer's epoch loop over ``steps`` steps, loader start included (as every epoch)."""
    trainer.steps_per_epoch = min(steps, len(trainer.train_loader) // trainer.cfg.train.accumulate)
    trainer.epoch_step = 0  # every round is a whole epoch from its first batch
    start = time.perf_counter()
    trainer._train_epoch(0, Throughput(trainer.steps_per_epoch, 0), StopRequest())
    images = trainer.steps_per_epoch * trainer.cfg.train.accumulate * trainer.cfg.data.batch_size
    return _rate(images, time.perf_counter() - start)


def _timed_eval(trainer: Any) -> float | None:
    from .evaluator import evaluate

    if not trainer.test_loaders:
        return None
    start = time.perf_counter()
    evaluate(trainer.model, trainer.test_loaders, trainer.runtime, trainer.cfg, None)
    count = sum(len(loader.dataset) for loader in trainer.test_loaders.values())
    return _rate(count, time.perf_counter() - start)


def _rounds(cfg: Config, steps: int, rounds: int, folder: Path) -> dict[str, list[float]]:
    from .runtime import Runtime
    from .trainer import Trainer

    loader = build_train_loader(cfg)
    step, runtime = build_train_step(cfg)
    batch = random_batch(cfg, runtime.device)
    step([batch])  # warm-up
    trainer = Trainer(replace(cfg, train=replace(cfg.train, image_every=0)), Runtime(cfg.runtime),
                      folder)
    _timed_loop(trainer, 1)  # warm-up
    rates: dict[str, list[float]] = {"loader": [], "step": [], "loop": []}
    for _ in range(rounds):  # interleaved, so that a neighbour's load hits all three alike
        rates["loader"].append(_timed_batches(loader, steps))
        rates["step"].append(_timed_steps(step, batch, steps, runtime.device))
        rates["loop"].append(_timed_loop(trainer, steps))
    evaluation = _timed_eval(trainer)
    rates["eval"] = [evaluation] if evaluation is not None else []
    trainer.tb.close()
    return rates


def measure_speed(cfg: Config, steps: int, rounds: int = 1) -> dict[str, Any]:
    """Median images/s of loader, step and loop over interleaved rounds, evaluation once, the
    setting they ran with, and the bottleneck."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # the trainer's own log lines would interleave with the table
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rates = _rounds(cfg, steps, rounds, Path(tmp))
    finally:
        root.setLevel(level)
    med = {k: statistics.median(v) if v else None for k, v in rates.items()}
    return {**med, "rounds": rates, "bottleneck": "loader" if med["loader"] < med["step"] else
            "step", "loop_over_step": med["loop"] / med["step"],
            "loader_over_step": med["loader"] / med["step"],
            "workers": resolve_workers(cfg.data.num_workers), "threads": torch.get_num_threads(),
            "batch": cfg.data.batch_size, "size": cfg.data.size, "steps": steps}


def speed_table(r: dict[str, Any]) -> str:
    evaluation = f"{r['eval']:.1f}" if r["eval"] is not None else "(no test set)"
    why = ("the loader (decoding and augmentation): more data.num_workers, or more cores"
           if r["bottleneck"] == "loader" else
           "the training step (compute): the loader keeps up")
    return "\n".join([
        f"batch {r['batch']} x {r['size']}px, {r['steps']} steps x {len(r['rounds']['step'])} "
        f"interleaved rounds (medians), data.num_workers {r['workers']}, {r['threads']} compute "
        "threads", "",
        "| part | images/s |", "|---|---:|",
        f"| loader alone | {r['loader']:.1f} |",
        f"| training step on in-memory tensors | {r['step']:.1f} |",
        f"| whole training loop | {r['loop']:.1f} |",
        f"| evaluation | {evaluation} |", "",
        f"loader / step: {r['loader_over_step']:.2f}x; loop / step: {r['loop_over_step']:.2f}x",
        f"bottleneck: {why}",
    ])
