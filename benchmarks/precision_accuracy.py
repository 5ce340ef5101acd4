"""What reduced precision costs in accuracy (issue 35 item 3): the masks of each runtime and
precision against PyTorch fp32's, on the labelled demo test set (rendered photographs: no
download here), through the API's own path (``sodkit.load(..., runtime=, precision=)`` then
``predict``, the maps quantised to 8 bits as ``sodkit predict`` writes them):

    .venv/bin/python benchmarks/precision_accuracy.py --checkpoint RUN/checkpoints/last.pt \\
        [--images 150] [--write]

For each variant: the mean |difference| to fp32's masks (in 1/255), the share of pixels off by
more than 1/255 and by more than 5/255, MAE and S-measure against the ground truth (sodkit's
:class:`~sodkit.metrics.sod.SODMetrics`, equal to PySODMetrics) and their change from fp32's,
and the time a image (the API's default batch, one process, the threads it has). The model is
the demo's (``make demo``: FPN / ResNet-18 trained on the demo's rendered training set), the
only trained model this machine has; a model trained on real photographs may differ.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = {  # label: (runtime, precision)
    "PyTorch fp32": ("torch", "fp32"),
    "onnxruntime fp32": ("onnx", "fp32"),
    "PyTorch bf16 (autocast)": ("torch", "bf16"),
    "onnxruntime int8 (static QDQ)": ("onnx", "int8"),
}


def demo_test_set(count: int) -> list[tuple[Path, Path]]:
    from sodkit.cache import cache_dir

    folder = cache_dir() / "demo-v1" / "DEMO-TE"
    images = sorted((folder / "images").glob("*"))[:count]
    if not images:
        raise SystemExit(f"no demo test set in {folder}: run `make demo` first")
    return [(p, folder / "masks" / f"{p.stem}.png") for p in images]


def run_variant(checkpoint: Path, runtime: str, precision: str, images: list[Path]
                ) -> tuple[list[np.ndarray], float]:
    import sodkit

    model = sodkit.load(checkpoint, device="cpu", runtime=runtime, precision=precision)
    model.predict(images[:2])  # warm-up (and the graph's export, once)
    start = time.perf_counter()
    maps = model.predict(images)
    seconds = (time.perf_counter() - start) / len(images)
    return [np.clip(np.rint(m * 255.0), 0, 255).astype(np.uint8) for m in maps], seconds


def scores(masks: list[np.ndarray], gts: list[np.ndarray]) -> dict[str, float]:
    from sodkit.metrics.sod import SODMetrics

    metrics = SODMetrics()
    for mask, gt in zip(masks, gts, strict=True):
        metrics.update(mask, gt)
    result = metrics.compute()
    return {"MAE": result["MAE"], "Smeasure": result["Smeasure"]}


def measure(checkpoint: Path, count: int) -> tuple[dict, int]:
    from sodkit.imageio import read_mask

    pairs = demo_test_set(count)
    images = [p for p, _ in pairs]
    gts = [read_mask(m) for _, m in pairs]
    rows, reference = {}, None
    for label, (runtime, precision) in VARIANTS.items():
        masks, seconds = run_variant(checkpoint, runtime, precision, images)
        if reference is None:
            reference = masks
        diffs = np.concatenate([np.abs(a.astype(np.int16) - b).ravel()
                                for a, b in zip(masks, reference, strict=True)])
        rows[label] = {"mean": float(diffs.mean()), "over1": float((diffs > 1).mean()),
                       "over5": float((diffs > 5).mean()), "seconds": seconds,
                       **scores(masks, gts)}
        print(label, rows[label], flush=True)
    return rows, len(images)


def report(rows: dict, count: int) -> str:
    base = rows["PyTorch fp32"]
    lines = ["| variant | mean \\|diff\\| to fp32 | pixels off > 1/255 | pixels off > 5/255 | "
             "MAE (change) | S-measure (change) | time a image |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for label, r in rows.items():
        lines.append(
            f"| {label} | {r['mean']:.3f}/255 | {r['over1'] * 100:.3f}% | "
            f"{r['over5'] * 100:.3f}% | {r['MAE']:.5f} ({r['MAE'] - base['MAE']:+.5f}) | "
            f"{r['Smeasure']:.5f} ({r['Smeasure'] - base['Smeasure']:+.5f}) | "
            f"{r['seconds'] * 1e3:.1f} ms |")
    return (f"{count} images of the demo test set (DEMO-TE, rendered photographs, 160 px input, "
            f"each mask at its photo's size), the demo model (`make demo`).\n\n"
            + "\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--images", type=int, default=150)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    import onnxruntime
    import torch
    from metrics_speed import write_block

    load = os.getloadavg()[0]
    rows, count = measure(args.checkpoint, args.images)
    text = report(rows, count)
    print(text)
    if args.write:
        header = (f"Command: `.venv/bin/python benchmarks/precision_accuracy.py --checkpoint "
                  f"{args.checkpoint} --images {args.images} --write` "
                  f"({platform.machine()}, 2 shared cores with AVX-512-BF16 and AMX, torch "
                  f"{torch.__version__}, onnxruntime {onnxruntime.__version__}, "
                  f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load:.1f} at the start, "
                  f"{os.getloadavg()[0]:.1f} at the end).\n\n")
        write_block("precision_accuracy", "### Precision and accuracy: each precision's masks "
                    "against fp32's\n\n" + header + text)


if __name__ == "__main__":
    main()
