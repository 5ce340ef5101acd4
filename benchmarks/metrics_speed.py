"""PySODMetrics vs sodkit.metrics on the same in-memory pairs, side by side in one process.

    .venv/bin/python benchmarks/metrics_speed.py --pairs 300 1000 --rounds 3 --write

Both sides see the same realistic 320x320 uint8 pairs, already decoded. The reference runs its
five classes (MAE, Smeasure, Emeasure, WeightedFmeasure, Fmeasure), one ``step`` per pair each;
sodkit runs ``SODMetrics`` (every metric, FmeasureV2's family included) with its default
``threads=2`` and with ``threads=1``. Rounds alternate the two sides and the median of each
timing is reported, as the machine's cores are shared (each round's own ratio is listed too).
sodkit's time per metric group comes from timing its weighted F-measure alone and its other
metrics alone (``measure_batch(weighted_f=False)``), and OpenCV's EDT of each whole image alone,
for scale (the weighted F-measure runs it on the box holding the GT and the non-zero prediction).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import cv2
import numpy as np
import py_sod_metrics as psm

from sodkit.metrics import SODMetrics
from sodkit.metrics.records import measure_batch
from sodkit.metrics.testing import realistic_pairs
from sodkit.metrics.wfmeasure import weighted_fmeasure_uint8
from sodkit.metrics.workspace import opencv_single_threaded

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.metrics_fixtures import largest_difference, reference_metrics  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
REFERENCE_CLASSES = {"MAE": psm.MAE, "Smeasure": psm.Smeasure, "Emeasure": psm.Emeasure,
                     "wFmeasure": psm.WeightedFmeasure, "Fmeasure": psm.Fmeasure}


def time_reference(pairs) -> dict[str, float]:
    """Seconds per reference class over all pairs."""
    seconds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, cls in REFERENCE_CLASSES.items():
            metric = cls()
            start = time.perf_counter()
            for pred, gt in pairs:
                metric.step(pred, gt)
            metric.get_results()
            seconds[name] = time.perf_counter() - start
    return seconds


def time_sodkit(pairs, threads: int | None) -> tuple[float, dict]:
    start = time.perf_counter()
    metrics = SODMetrics(threads=threads)
    for pred, gt in pairs:
        metrics.update(pred, gt)
    result = metrics.compute()
    return time.perf_counter() - start, result


def time_wf_alone(pairs) -> float:
    start = time.perf_counter()
    with opencv_single_threaded():  # as inside SODMetrics
        for pred, gt in pairs:
            weighted_fmeasure_uint8(pred, gt > 128)
    return time.perf_counter() - start


def time_edt_alone(pairs) -> float:
    """OpenCV's exact EDT of each GT's background: the part of wF that nothing here replaces."""
    backgrounds = [(gt <= 128).view(np.uint8) for _, gt in pairs]
    start = time.perf_counter()
    with opencv_single_threaded():
        for background in backgrounds:
            cv2.distanceTransform(background, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    return time.perf_counter() - start


def time_histogram_metrics(pairs) -> float:
    """Everything but the weighted F-measure, in the engine's chunks of 32, single-threaded."""
    preds, gts = np.stack([p for p, _ in pairs]), np.stack([g for _, g in pairs])
    start = time.perf_counter()
    with opencv_single_threaded():
        for i in range(0, len(pairs), 32):
            measure_batch(preds[i:i + 32], gts[i:i + 32], weighted_f=False)
    return time.perf_counter() - start


def measure(count: int, rounds: int) -> dict:
    pairs = realistic_pairs(count, 320, 320, seed=0)
    runs: dict[str, list[float]] = {}
    ratios = []
    for _ in range(rounds):
        reference = time_reference(pairs)
        for name, seconds in reference.items():
            runs.setdefault(f"ref {name}", []).append(seconds)
        total, result = time_sodkit(pairs, None)
        runs.setdefault("sodkit", []).append(total)
        ratios.append(sum(reference.values()) / total)
        runs.setdefault("sodkit 1 thread", []).append(time_sodkit(pairs, 1)[0])
        runs.setdefault("sodkit wF alone", []).append(time_wf_alone(pairs))
        runs.setdefault("sodkit histogram metrics", []).append(time_histogram_metrics(pairs))
        runs.setdefault("sodkit EDT", []).append(time_edt_alone(pairs))
    median = {name: statistics.median(values) for name, values in runs.items()}
    diffs = largest_difference(result, reference_metrics(pairs))
    return {"count": count, "rounds": rounds, "median": median, "diffs": diffs, "ratios": ratios}


def report(m: dict) -> str:
    med, n = m["median"], m["count"]
    ref = {name: med[f"ref {name}"] for name in REFERENCE_CLASSES}
    ref_total = sum(ref.values())
    ours_wf = med["sodkit wF alone"]
    ours_rest = med["sodkit histogram metrics"]
    ref_rest = ref_total - ref["wFmeasure"]
    ms = 1000 / n
    lines = [f"#### {n} pairs of 320x320 (median of {m['rounds']} rounds, ms per pair)", "",
             "| what | PySODMetrics | sodkit | ratio |", "|---|---:|---:|---:|"]
    for name, seconds in ref.items():
        lines.append(f"| {name} | {seconds * ms:.2f} | | |")
    lines += [
        f"| MAE + S + E + F (sodkit: shared histograms, FmeasureV2 family too) | "
        f"{ref_rest * ms:.2f} | {ours_rest * ms:.2f} | {ref_rest / ours_rest:.1f}x |",
        f"| weighted F | {ref['wFmeasure'] * ms:.2f} | {ours_wf * ms:.2f} | "
        f"{ref['wFmeasure'] / ours_wf:.1f}x |",
        f"| (OpenCV's exact EDT of the whole image, for scale) | | {med['sodkit EDT'] * ms:.2f} "
        "| |",
        f"| **total, sodkit `threads=1`** | {ref_total * ms:.2f} | "
        f"{med['sodkit 1 thread'] * ms:.2f} | **{ref_total / med['sodkit 1 thread']:.1f}x** |",
        f"| **total, sodkit default `threads=2` (2 images' wF at once)** | {ref_total * ms:.2f} | "
        f"{med['sodkit'] * ms:.2f} | **{ref_total / med['sodkit']:.1f}x** |",
        "", "Each round's own total ratio (default threads): "
        + ", ".join(f"{r:.1f}x" for r in m["ratios"]) + ".",
        "", f"Largest absolute difference over every metric and curve: "
        f"{max(m['diffs'].values()):.2e} (worst key: {max(m['diffs'], key=m['diffs'].get)}).",
    ]
    return "\n".join(lines) + "\n"


def replace_block(text: str, tag: str, block: str) -> str:
    """Put ``block`` between ``<!-- tag -->`` markers in the ``## Metrics`` section."""
    begin, end = f"<!-- {tag} -->", f"<!-- /{tag} -->"
    wrapped = f"{begin}\n{block}{end}\n"
    if begin in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        return head + wrapped + ("\n" + tail if tail else "")
    if "## Metrics" not in text:
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + "## Metrics\n\n"
    head, rest = text.split("## Metrics", 1)
    section, sep, tail = rest.partition("\n## ")
    section = section.rstrip("\n") + "\n\n" + wrapped
    return head + "## Metrics" + section + ("\n## " + tail if sep else "")


def write_block(tag: str, block: str) -> None:
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
    RESULTS.write_text(replace_block(text, tag, block))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    blocks = []
    for count in args.pairs:
        text = report(measure(count, args.rounds))
        print(text)
        blocks.append(text)
    if args.write:
        header = (f"Command: `.venv/bin/python benchmarks/metrics_speed.py --pairs "
                  f"{' '.join(map(str, args.pairs))} --rounds {args.rounds} --write` "
                  f"({platform.processor() or platform.machine()}, 2 shared cores, Python "
                  f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}).\n\n")
        write_block("metrics_speed", "### In-memory pairs: PySODMetrics vs SODMetrics\n\n"
                    + header + "\n".join(blocks))


if __name__ == "__main__":
    main()
