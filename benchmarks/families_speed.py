"""The optional metric families: their references vs sodkit on the same in-memory pairs.

    .venv/bin/python benchmarks/families_speed.py --pairs 100 --rounds 3 --write

Each family's reference (PySODMetrics 1.6 classes, or the BiRefNet formulas restated in
``tests/families_fixtures.py``) and sodkit's family (``measure_families``, one image at a time,
one thread) measure the same realistic 320x320 uint8 pairs, in alternating rounds; medians are
reported (the cores are shared). CCM's RGB images are ``camouflaged_image``s of the GTs (made
outside sodkit's timing, inside the reference's: a small share of it). The standard set
(``SODMetrics()``, default threads) is timed
alongside, for the cost of each family relative to it. Each row also gives the largest
difference between the two sides' dataset values.
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
from sodkit.metrics.families import FAMILIES, measure_families, summarize_families
from sodkit.metrics.testing import realistic_pairs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metrics_speed import write_block  # noqa: E402
from tests import families_fixtures as ref  # noqa: E402

REFERENCES = {
    "MSE": lambda pairs: {"MSE": ref.birefnet_mse(pairs)},
    "HCE": lambda pairs: {"HCE": ref.reference_hce(pairs)[0]},
    "SI": ref.reference_size_invariance,
    "MSIoU": ref.reference_msiou,
    "BIoU": ref.birefnet_biou,
    "mBA": lambda pairs: {"mBA": ref.birefnet_mba(pairs)},
    "CM": lambda pairs: {"CM": ref.reference_cm(pairs)},
    "CCM": lambda pairs: {"CCM": ref.reference_ccm(
        (p, g, ref.camouflaged_image(g, i)) for i, (p, g) in enumerate(pairs))},
}
SOURCES = {"MSE": "BiRefNet", "BIoU": "BiRefNet", "mBA": "BiRefNet"}


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def _standard(pairs) -> None:
    metrics = SODMetrics()
    for pred, gt in pairs:
        metrics.update(pred, gt)
    metrics.compute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    pairs = realistic_pairs(args.pairs, 320, 320, seed=1)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in FAMILIES}
    standard, diffs = [], {}
    for _ in range(args.rounds):
        standard.append(_timed(_standard, pairs)[0])
        for name in FAMILIES:
            images = [ref.camouflaged_image(g, i) for i, (_, g) in enumerate(pairs)]
            measure_families((name,), pairs[:1], 1, images)  # warm: imports, caches
            t_ours, rows = _timed(measure_families, (name,), pairs, len(pairs), images)
            t_ref, expected = _timed(REFERENCES[name], pairs)
            ours = summarize_families(rows)
            diffs[name] = max(abs(ours[k] - v) for k, v in expected.items()
                              if not np.isnan(v))
            times[name].append((t_ref, t_ours))
    ms = 1000 / len(pairs)
    std = statistics.median(standard) * ms
    lines = ["### Optional metric families: references vs sodkit\n",
             f"Command: `.venv/bin/python benchmarks/families_speed.py --pairs {args.pairs} "
             f"--rounds {args.rounds} --write` ({platform.machine()}, shared cores, Python "
             f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}). "
             f"{args.pairs} realistic 320x320 pairs, median of {args.rounds} rounds, ms per "
             f"pair, one thread. The standard set (`SODMetrics()`) took {std:.2f} ms per pair "
             "in the same rounds.\n",
             "| family | reference | reference ms | sodkit ms | ratio | x standard set "
             "| largest difference |", "|---|---|---:|---:|---:|---:|---:|"]
    for name in FAMILIES:
        t_ref = statistics.median(t for t, _ in times[name]) * ms
        t_ours = statistics.median(t for _, t in times[name]) * ms
        lines.append(f"| {name} | {SOURCES.get(name, 'PySODMetrics')} | {t_ref:.2f} | "
                     f"{t_ours:.2f} | {t_ref / t_ours:.1f}x | {t_ours / std:.1f} | "
                     f"{diffs[name]:.1e} |")
    block = "\n".join(lines) + "\n"
    print(block)
    if args.write:
        write_block("families_speed", block)


if __name__ == "__main__":
    main()
