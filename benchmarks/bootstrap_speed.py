"""``sodkit eval --ci``'s bootstrap: 1,000 resamples of 5,000 images, seconds not minutes.

    .venv/bin/python benchmarks/bootstrap_speed.py --images 5000 --resamples 1000 --write

Two methods' per-image records (what ``sodkit eval`` holds after measuring) are made from 50
measured realistic 320x320 pairs each, repeated to the image count (the bootstrap's cost depends
on the count, not on the pixels); then ``bootstrap`` gives every standard key's interval for both
and their paired comparison, as ``--ci --baseline`` does. Median of the rounds, wall time.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from sodkit.metrics import SODMetrics
from sodkit.metrics.bootstrap import bootstrap
from sodkit.metrics.records import Records
from sodkit.metrics.testing import realistic_pairs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metrics_speed import write_block  # noqa: E402


def records(images: int, seed: int) -> Records:
    metrics = SODMetrics()
    for pred, gt in realistic_pairs(50, seed=seed):
        metrics.update(pred, gt)
    base = metrics.records()
    take = np.arange(images) % len(base)
    return Records(np.arange(images), base.hist[take], base.adaptive[take], base.scalars[take])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    methods = {"A": records(args.images, 0), "B": records(args.images, 1)}
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        result = bootstrap(methods, args.resamples, seed=0, baseline="A")
        times.append(time.perf_counter() - start)
    keys = len(result["intervals"]["A"])
    line = (f"{args.resamples} resamples of {args.images} images, 2 methods, {keys} keys each "
            f"plus the paired comparison: {statistics.median(times):.2f} s (median of "
            f"{args.rounds}; rounds {', '.join(f'{t:.2f}' for t in times)} s)")
    print(line)
    if args.write:
        write_block("bootstrap_speed", (
            "### `sodkit eval --ci`: bootstrap intervals\n\n"
            f"Command: `.venv/bin/python benchmarks/bootstrap_speed.py --images {args.images} "
            f"--resamples {args.resamples} --rounds {args.rounds} --write` "
            f"({platform.machine()}, 2 shared cores, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%d')}).\n\n{line}.\n"))


if __name__ == "__main__":
    main()
