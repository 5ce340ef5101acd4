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
import math
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from ..config import Config
from ..data import build_train_loader
from ..resources import resolve_workers
from ..text import plural
from .bench import build_train_step, random_batch
from .logging import Throughput, format_seconds
from .preemption import StopRequest

logger = logging.getLogger(__name__)
# its progress lines: shown while measure_speed quietens the trainer's own log (root at WARNING)
_PROGRESS_LOG = logging.getLogger(__name__ + ".progress")
_PROGRESS_LOG.setLevel(logging.INFO)


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


def plan_text(cfg: Config, steps: int, rounds: int) -> str:
    """What ``bench speed`` will run, said before it starts (#28: 3 default rounds of a slow
    step took 10 minutes that nobody announced)."""
    from ..data.pairs import resolve_dataset

    tests = ", ".join(resolve_dataset(d, cfg.data_root).name for d in cfg.data.test)
    return (f"bench speed: {plural(rounds, 'round')} of {plural(steps, 'step')} each of the "
            f"loader alone, the training step and the whole training loop (batch "
            f"{cfg.data.batch_size} x {cfg.data.size}px), after a warm-up step of each; then "
            f"one evaluation ({tests or 'no test set'}); --steps and --rounds make it shorter")


def estimate_text(step_s: float, batch_s: float, steps: int, rounds: int,
                  test_images: int, test_batch: int) -> str:
    """A rough duration from one timed step and one timed batch: a round is ``steps`` batches,
    ``steps`` steps and a loop of both; the evaluation a forward (a third of a step) per test
    batch."""
    per_round = steps * (2 * step_s + 2 * batch_s) + batch_s  # + the loader's first batch
    evaluation = math.ceil(test_images / max(test_batch, 1)) * step_s / 3
    total = rounds * per_round + evaluation
    return (f"estimate: about {format_seconds(total)} (h:mm:ss; one training step took "
            f"{step_s:.2f} s, one loader batch {batch_s:.2f} s)")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rounds(cfg: Config, steps: int, rounds: int, folder: Path) -> dict[str, list[float]]:
    from ..progress import Progress
    from .runtime import Runtime
    from .trainer import Trainer

    _say(plan_text(cfg, steps, rounds))
    loader = build_train_loader(cfg)
    start = time.perf_counter()
    next(iter(loader))
    batch_s = time.perf_counter() - start
    step, runtime = build_train_step(cfg)
    batch = random_batch(cfg, runtime.device)
    step([batch])  # warm-up
    start = time.perf_counter()
    step([batch])  # timed for the estimate
    step_s = time.perf_counter() - start
    trainer = Trainer(replace(cfg, train=replace(cfg.train, image_every=0)), Runtime(cfg.runtime),
                      folder)
    tests = sum(len(loader.dataset) for loader in trainer.test_loaders.values())
    _say(estimate_text(step_s, batch_s, steps, rounds, tests, cfg.data.test_batch_size))
    _timed_loop(trainer, 1)  # warm-up
    rates: dict[str, list[float]] = {"loader": [], "step": [], "loop": []}
    parts = 3 * rounds + (1 if trainer.test_loaders else 0)
    with Progress(parts, "bench speed", unit="part", log=_PROGRESS_LOG,
                  summary=True) as bar:
        for i in range(rounds):  # interleaved, so that a neighbour's load hits all three alike
            for name, measure in (("loader", lambda: _timed_batches(loader, steps)),
                                  ("step", lambda: _timed_steps(step, batch, steps,
                                                                runtime.device)),
                                  ("loop", lambda: _timed_loop(trainer, steps))):
                bar.doing(f"round {i + 1}/{rounds}: {name}")
                rates[name].append(measure())
                bar.update()
        if trainer.test_loaders:
            bar.doing("evaluation")
        evaluation = _timed_eval(trainer)
        bar.update(1 if evaluation is not None else 0)
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
        f"batch {r['batch']} x {r['size']}px, {plural(r['steps'], 'step')} x "
        f"{plural(len(r['rounds']['step']), 'interleaved round')} (medians), "
        f"data.num_workers {r['workers']}, {plural(r['threads'], 'compute thread')}", "",
        "| part | images/s |", "|---|---:|",
        f"| loader alone | {r['loader']:.1f} |",
        f"| training step on in-memory tensors | {r['step']:.1f} |",
        f"| whole training loop | {r['loop']:.1f} |",
        f"| evaluation | {evaluation} |", "",
        f"loader / step: {r['loader_over_step']:.2f}x; loop / step: {r['loop_over_step']:.2f}x",
        f"bottleneck: {why}",
    ])
