"""Checkpoint the backbone per stage or per block? Both measured, with timm's own as a third.

    .venv/bin/python benchmarks/checkpoint_granularity.py configs/demo.yaml [key=value ...]

Each granularity runs in a fresh process with ``MALLOC_MMAP_THRESHOLD_=65536`` (see
``sodkit/engine/memory.py``): one warm-up step, then the peak memory two steps add, the bytes saved
for backward, and the step time. The decoder is checkpointed too, except for ``timm`` (timm's
``set_grad_checkpointing`` on the features model only: per stage, first and last module skipped,
BatchNorm statistics counted twice). Gradients are kept between steps here (``zero_grad`` to
zero, not None), so the figures are activations only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

GRANULARITIES = ["plain", "timm", "stage", "block"]


def child(config: str, overrides: list[str], granularity: str) -> None:
    import torch

    from sodkit.config import load_config
    from sodkit.engine.bench import random_batch
    from sodkit.engine.memory import MB, PeakMemory, SavedTensors
    from sodkit.loss import build_criterion
    from sodkit.network import build_network

    cfg = load_config(config, overrides)
    model = build_network(cfg.model).train()
    if granularity != "plain":
        model.backbone.set_checkpointing(True, granularity)
        model.checkpoint_decoder = granularity != "timm"
    criterion = build_criterion(cfg.loss)
    batch = random_batch(cfg, torch.device("cpu"))

    def step() -> None:
        loss, _ = criterion(model(batch["image"]), batch["mask"])
        loss.backward()
        model.zero_grad(set_to_none=False)

    step()
    peaks, times = [], []
    for _ in range(2):
        start = time.perf_counter()
        with PeakMemory(torch.device("cpu")) as peak:
            step()
        peaks.append(peak.added_bytes / MB)
        times.append(time.perf_counter() - start)
    with SavedTensors(model) as saved:
        criterion(model(batch["image"]), batch["mask"])
    print(json.dumps({"granularity": granularity, "peak_mb": max(peaks),
                      "saved_mb": saved.nbytes / MB, "step_s": min(times)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--child", choices=GRANULARITIES, help=argparse.SUPPRESS)
    args = parser.parse_intermixed_args()
    if args.child:
        child(args.config, args.overrides, args.child)
        return
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    print("| backbone checkpointing | peak_mb | saved_mb | step_s |\n|---|---:|---:|---:|")
    for granularity in GRANULARITIES:
        done = subprocess.run([sys.executable, __file__, args.config, *args.overrides,
                               "--child", granularity], env=env, capture_output=True,
                              text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"| {granularity} | {row['peak_mb']:.1f} | {row['saved_mb']:.1f} | "
              f"{row['step_s']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
