"""Does sodkit's training loop cost anything? Its steps/s against a bare hand-written loop.

    .venv/bin/python benchmarks/overhead.py configs/demo.yaml [key=value ...] [--steps 10]
        [--rounds 5]

Both loops train the same model with the same optimizer on the same in-memory batches (the
config's input size and batch size; no data loader, so only the loops differ):

- **bare**: ``loss = criterion(model(x), y); loss.backward(); opt.step(); opt.zero_grad()``;
- **sodkit**: ``Trainer._train_epoch``, i.e. ``TrainStep`` (autocast, fp32 criterion, scaler,
  accumulation context), the LR scheduler, loss bookkeeping, throughput meter and the log line
  every ``train.log_every`` steps (with its one device sync), exactly as ``sodkit train`` runs.

Rounds alternate bare / sodkit so that a neighbour's load on a shared machine hits both alike.
Two figures: the median of the rounds' ratios, and the ratio of each loop's fastest round (load
from other processes only ever slows a round down, so the fastest round is the closest to the
loop's own speed, as ``timeit`` reports).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from sodkit.config import load_config
from sodkit.engine.logging import Throughput
from sodkit.engine.runtime import Runtime
from sodkit.engine.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.sod_fixtures import write_duts_layout  # noqa: E402  (a tiny stand-in dataset)


def make_trainer(config: str, overrides: list[str], folder: Path) -> Trainer:
    """A Trainer of ``config`` whose loader files are a tiny stand-in (the batches are replaced)."""
    data = write_duts_layout(folder / "data", n_train=4, n_test=1)
    cfg = load_config(config, [*overrides, f"data_root={data}", "data.train=[{preset: duts-tr}]",
                               "data.test=[]", "data.batch_size=1", "data.num_workers=0"])
    return Trainer(cfg, Runtime(cfg.runtime), folder / "run")


def bare_loop(trainer: Trainer, batches: list[dict], optimizer: torch.optim.Optimizer) -> None:
    model, criterion = trainer.model, trainer.criterion
    for batch in batches:
        loss, _ = criterion(model(batch["image"]), batch["mask"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def sodkit_loop(trainer: Trainer, batches: list[dict]) -> None:
    trainer.train_loader = batches
    trainer.steps_per_epoch = len(batches)
    trainer._train_epoch(0, Throughput(len(batches), 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="a recipe, e.g. configs/demo.yaml")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--steps", type=int, default=10, help="steps per round and loop")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_intermixed_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = make_trainer(args.config, args.overrides, Path(tmp))
        data_cfg = load_config(args.config, args.overrides).data
        size, batch = data_cfg.size, data_cfg.batch_size
        g = torch.Generator().manual_seed(0)
        batches = [{"image": torch.randn(batch, 3, size, size, generator=g),
                    "mask": (torch.rand(batch, 1, size, size, generator=g) > 0.5).float()}
                   for _ in range(args.steps)]
        optimizer = trainer.optimizer
        trainer.model.train()
        bare_loop(trainer, batches[:2], optimizer)  # warm-up: allocations, optimizer state
        sodkit_loop(trainer, batches[:2])
        rows = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            bare_loop(trainer, batches, optimizer)
            bare = args.steps / (time.perf_counter() - start)
            start = time.perf_counter()
            sodkit_loop(trainer, batches)
            ours = args.steps / (time.perf_counter() - start)
            rows.append((bare, ours))
        trainer.tb.close()
    ratios = [ours / bare for bare, ours in rows]
    print(f"batch {batch} x {size}px, {args.steps} steps per loop and round, "
          f"{torch.get_num_threads()} threads\n")
    print("| round | bare steps/s | sodkit steps/s | ratio |\n|---:|---:|---:|---:|")
    for i, ((bare, ours), ratio) in enumerate(zip(rows, ratios, strict=True), start=1):
        print(f"| {i} | {bare:.3f} | {ours:.3f} | {ratio:.3f} |")
    best = max(ours for _, ours in rows) / max(bare for bare, _ in rows)
    print(f"\nmedian ratio sodkit / bare: **{statistics.median(ratios):.3f}x**; fastest rounds: "
          f"bare {max(b for b, _ in rows):.3f}, sodkit {max(o for _, o in rows):.3f} steps/s, "
          f"**{best:.3f}x**")


if __name__ == "__main__":
    main()
