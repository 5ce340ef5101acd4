"""``sodkit bench speed``: images/s of each part of training, and which part limits the loop.

Four measurements on the config as it would train (same loaders, workers, threads, model):

- ``loader``: batches from the training DataLoader alone (decode, augment, collate);
- ``step``: :class:`~sodkit.engine.step.TrainStep` on an in-memory batch (no loader);
- ``loop``: the trainer's own epoch loop (``Trainer._train_epoch``) with the real loader,
  starting a fresh loader iterator as every epoch does;
- ``eval``: :func:`~sodkit.engine.evaluator.evaluate` over the test sets (inference, resizing
  to the GT, metrics), without writing files.

Each runs a warm-up first (worker start, allocations, the optimizer's state). The loop cannot be
faster than the slower of loader and step; the report names that one.
"""

from __future__ import annotations

import logging
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

logger = logging.getLogger(__name__)


def _rate(images: int, seconds: float) -> float:
    return images / max(seconds, 1e-9)


def loader_speed(cfg: Config, steps: int) -> float:
    loader = build_train_loader(cfg)
    batches = iter(loader)
    next(batches)  # workers started, first batch done
    start, images = time.perf_counter(), 0
    for _ in range(min(steps, len(loader) - 1)):
        images += next(batches)["image"].shape[0]
    return _rate(images, time.perf_counter() - start)


def step_speed(cfg: Config, steps: int) -> float:
    step, runtime = build_train_step(cfg)
    batch = random_batch(cfg, runtime.device)
    step([batch])
    start = time.perf_counter()
    images = sum(step([batch]).images for _ in range(steps))
    if runtime.device.type == "cuda":
        torch.cuda.synchronize(runtime.device)
    return _rate(images, time.perf_counter() - start)


def loop_and_eval_speed(cfg: Config, steps: int) -> tuple[float, float | None]:
    """The trainer's epoch loop over ``steps`` steps, then one evaluation of the test sets."""
    from .evaluator import evaluate
    from .runtime import Runtime
    from .trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(cfg.runtime)
        trainer = Trainer(replace(cfg, train=replace(cfg.train, image_every=0)), runtime,
                          Path(tmp))
        trainer.steps_per_epoch = 1
        trainer._train_epoch(0, Throughput(1, 0))  # warm-up
        trainer.steps_per_epoch = min(steps, len(trainer.train_loader) // cfg.train.accumulate)
        start = time.perf_counter()
        trainer._train_epoch(0, Throughput(trainer.steps_per_epoch, 0))
        images = trainer.steps_per_epoch * cfg.train.accumulate * cfg.data.batch_size
        loop = _rate(images, time.perf_counter() - start)
        trainer.tb.close()
        if not trainer.test_loaders:
            return loop, None
        start = time.perf_counter()
        evaluate(trainer.model, trainer.test_loaders, runtime, trainer.cfg, None)
        count = sum(len(loader.dataset) for loader in trainer.test_loaders.values())
        return loop, _rate(count, time.perf_counter() - start)


def measure_speed(cfg: Config, steps: int) -> dict[str, Any]:
    """images/s of loader, step, loop and eval, the setting they ran with, and the bottleneck."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # the trainer's own log lines would interleave with the table
    try:
        loader = loader_speed(cfg, steps)
        step = step_speed(cfg, steps)
        loop, evaluation = loop_and_eval_speed(cfg, steps)
    finally:
        root.setLevel(level)
    bottleneck = "loader" if loader < step else "step"
    return {"loader": loader, "step": step, "loop": loop, "eval": evaluation,
            "bottleneck": bottleneck, "loop_over_step": loop / step,
            "loader_over_step": loader / step,
            "workers": resolve_workers(cfg.data.num_workers),
            "threads": torch.get_num_threads(), "batch": cfg.data.batch_size,
            "size": cfg.data.size, "steps": steps}


def speed_table(r: dict[str, Any]) -> str:
    evaluation = f"{r['eval']:.1f}" if r["eval"] is not None else "(no test set)"
    why = ("the loader (decoding and augmentation): more data.num_workers, or more cores"
           if r["bottleneck"] == "loader" else
           "the training step (compute): the loader keeps up")
    return "\n".join([
        f"batch {r['batch']} x {r['size']}px, {r['steps']} steps, data.num_workers "
        f"{r['workers']}, {r['threads']} compute threads", "",
        "| part | images/s |", "|---|---:|",
        f"| loader alone | {r['loader']:.1f} |",
        f"| training step on in-memory tensors | {r['step']:.1f} |",
        f"| whole training loop | {r['loop']:.1f} |",
        f"| evaluation | {evaluation} |", "",
        f"loader / step: {r['loader_over_step']:.2f}x; loop / step: {r['loop_over_step']:.2f}x",
        f"bottleneck: {why}",
    ])
