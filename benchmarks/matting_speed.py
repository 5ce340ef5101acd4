"""The matting metrics: mmagic 1.2.0's per-image computation vs sodkit's, at 1024 px.

    .venv/bin/python benchmarks/matting_speed.py --pairs 8 --rounds 5 \
        --gca /path/to/GCA-Matting/utils/evaluate.py --write

The reference is mmagic 1.2.0's (``mmagic/evaluation/metrics/{sad,matting_mse,gradient_error,
connectivity_error}.py`` and ``functional/gaussian_funcs.py``), restated below from those files'
operations (mmagic itself needs mmengine and mmcv): SAD and MSE as float64 sums over the
trimap-masked prediction, the gradient error with ``cv2.normalize`` (min-max) and the full 9x9
``cv2.filter2D``, the connectivity error with one ``cv2.connectedComponentsWithStats`` per
threshold on float64 maps. sodkit's side is ``sodkit.metrics.matting.matting_errors`` (MAD
included). ``--gca`` also times Yaoyi Li's port (GCA-Matting ``utils/evaluate.py``, read from a
local copy, not part of sodkit) and shows where it differs: no min-max scaling before the
gradient, and ``getLargestCC`` counts the background as a component.

Pairs: 1024 x 1024 GT mattes with a soft-edged body, hair-like strands and a veil, the
prediction blurred, shifted and dimmed (``tests/matting_oracle.strands``), each with its trimap
(unknown band of 10 px); measured whole-image and over the trimap, in alternating rounds,
medians reported.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metrics_speed import write_block  # noqa: E402
from sodkit.metrics.matting import KEYS, matting_errors  # noqa: E402
from tests.matting_oracle import strands, trimap_of  # noqa: E402


def _kernel(sigma: float = 1.4, epsilon: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    half = np.ceil(sigma * np.sqrt(-2 * np.log(np.sqrt(2 * np.pi) * sigma * epsilon)))
    offsets = np.arange(-half, half + 1)
    gauss = np.exp(-offsets ** 2 / (2 * sigma ** 2)) / (sigma * np.sqrt(2 * np.pi))
    kernel = np.outer(gauss, -offsets * gauss / sigma ** 2)
    kernel /= np.sqrt((kernel ** 2).sum())
    return kernel, kernel.T


def _gradient_magnitude(alpha: np.ndarray) -> np.ndarray:
    normed = np.zeros_like(alpha)
    cv2.normalize(alpha, normed, 1.0, 0.0, cv2.NORM_MINMAX)
    kx, ky = _kernel()
    gx = cv2.filter2D(normed, -1, kx, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.filter2D(normed, -1, ky, borderType=cv2.BORDER_REPLICATE)
    return np.sqrt(gx ** 2 + gy ** 2)


def mmagic_reference(pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray) -> dict[str, float]:
    """mmagic 1.2.0's SAD, MattingMSE, GradientError, ConnectivityError of one uint8 pair
    (pred already masked by the trimap), in sodkit's units."""
    p, g = pred / 255.0, gt / 255.0
    unknown = trimap == 128
    sad = np.abs(p - g).sum() / 1000
    mse = ((p - g) ** 2).sum() / unknown.sum()
    grad = ((_gradient_magnitude(g) - _gradient_magnitude(p)) ** 2 * unknown).sum() / 1000
    steps = np.arange(0, 1.1, 0.1)
    round_down = -np.ones_like(g)
    for i in range(1, len(steps)):
        both = ((g >= steps[i]) & (p >= steps[i])).astype(np.uint8)
        _, labels, stats, _ = cv2.connectedComponentsWithStats(both, connectivity=4)
        sizes = stats[1:, -1]
        omega = np.zeros_like(g)
        if len(sizes):
            omega[labels == np.argmax(sizes) + 1] = 1
        round_down[(round_down == -1) & (omega == 0)] = steps[i - 1]
    round_down[round_down == -1] = 1
    dg, dp = g - round_down, p - round_down
    conn = np.sum(np.abs((1 - dg * (dg >= 0.15)) - (1 - dp * (dp >= 0.15))) * unknown) / 1000
    return {"SAD": sad, "MattingMSE": mse * 1000, "Grad": grad, "Conn": conn}


def _gca(path: Path):
    """GCA-Matting's evaluate.py, loaded from a local copy (its np.float / np.int: numpy's
    removed aliases, restored for it)."""
    np.float, np.int = float, int  # type: ignore[attr-defined]
    spec = importlib.util.spec_from_file_location("gca_evaluate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gca_reference(module, pred: np.ndarray, gt: np.ndarray, trimap: np.ndarray
                  ) -> dict[str, float]:
    p, g = pred.astype(np.float64), gt.astype(np.float64)
    return {"SAD": module.comput_sad_loss(p, g, trimap)[0],
            "MattingMSE": module.compute_mse_loss(p, g, trimap) * 1000,
            "Grad": module.compute_gradient_loss(p, g, trimap),
            "Conn": module.compute_connectivity_error(p, g, trimap, 0.1)}


def make_pairs(count: int, size: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for seed in range(count):
        pred, gt = strands(size, seed)
        out.append((pred, gt, trimap_of(gt, 10)))
    return out


def _timed(fn, pairs) -> tuple[float, list]:
    start = time.perf_counter()
    values = [fn(*pair) for pair in pairs]
    return (time.perf_counter() - start) / len(pairs) * 1000, values


def measure(pairs, rounds: int, gca) -> dict:
    whole = np.full(pairs[0][1].shape, 128, np.uint8)
    sides = {
        "mmagic, trimap": lambda p, g, t: mmagic_reference(np.where(t == 0, 0, np.where(
            t == 255, 255, p)).astype(np.uint8), g, t),
        "sodkit, trimap": lambda p, g, t: dict(zip(KEYS, matting_errors(p, g, t), strict=True)),
        "mmagic, whole image": lambda p, g, t: mmagic_reference(p, g, whole),
        "sodkit, whole image": lambda p, g, t: dict(zip(KEYS, matting_errors(p, g),
                                                        strict=True)),
    }
    if gca is not None:
        sides["GCA-Matting, trimap"] = lambda p, g, t: gca_reference(gca, p, g, t)
    times = {name: [] for name in sides}
    values = {}
    for round_ in range(rounds):
        for name in (list(sides) if round_ % 2 == 0 else list(sides)[::-1]):
            ms, values[name] = _timed(sides[name], pairs)
            times[name].append(ms)
    return {"times": {k: statistics.median(v) for k, v in times.items()}, "values": values}


def _difference(ours: list[dict], reference: list[dict]) -> dict[str, float]:
    return {key: max(abs(o[key] - r[key]) / max(abs(r[key]), 1e-12)
                     for o, r in zip(ours, reference, strict=True)) for key in reference[0]}


def report(result: dict, count: int, size: int) -> str:
    times, values = result["times"], result["values"]
    lines = [f"{count} pairs of {size} x {size} px (strands, veil, soft body; trimap unknown "
             f"band 10 px), ms per pair, median of the rounds, one process.", "",
             "| side | region | ms per pair | largest relative difference to mmagic |",
             "|---|---|---:|---|"]
    for name, ms in times.items():
        side, region = name.split(", ")
        reference = values[f"mmagic, {region}"] if region != "trimap" or "GCA" not in side \
            else values["mmagic, trimap"]
        diff = "" if side == "mmagic" else ", ".join(
            f"{k} {v:.1e}" for k, v in _difference(values[name], reference).items())
        lines.append(f"| {side} | {region} | {ms:.1f} | {diff} |")
    for region in ("trimap", "whole image"):
        ratio = times[f"mmagic, {region}"] / times[f"sodkit, {region}"]
        lines.append(f"\nsodkit is {ratio:.1f}x mmagic's computation ({region}).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--gca", type=Path, help="a local copy of GCA-Matting's "
                                                 "utils/evaluate.py, timed as well")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    cv2.setNumThreads(1)
    pairs = make_pairs(args.pairs, args.size)
    text = report(measure(pairs, args.rounds, _gca(args.gca) if args.gca else None),
                  args.pairs, args.size)
    print(text)
    if args.write:
        gca = " --gca GCA-Matting/utils/evaluate.py" if args.gca else ""
        header = (f"Command: `.venv/bin/python benchmarks/matting_speed.py --pairs {args.pairs} "
                  f"--size {args.size} --rounds {args.rounds}{gca} --write` "
                  f"({platform.processor() or platform.machine()}, 2 shared cores, OpenCV one "
                  f"thread, Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}).\n\n")
        write_block("matting_speed", "### Matting metrics: mmagic 1.2.0 vs sodkit\n\n" + header
                    + text)


if __name__ == "__main__":
    main()
