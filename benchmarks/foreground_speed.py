"""Blur-fusion foreground estimation: BiRefNet's ``refine_foreground`` vs sodkit's, on this CPU.

    .venv/bin/python benchmarks/foreground_speed.py --sizes 1024 2048 --rounds 5 \
        --birefnet /path/to/BiRefNet --write

The reference is the authors' function, ``image_proc.refine_foreground(image, mask,
device='cpu')`` (its ``FB_blur_fusion_foreground_estimator_cpu_2``), imported from a local
BiRefNet checkout (``--birefnet``: not part of sodkit; image_proc.py imports torch, torchvision
and PIL). Without it, the same formula restated here from its definition stands in (two box
passes, 90 then 6, float32, on the whole image). sodkit's side is
``sodkit.foreground.blur_fusion`` (float) and ``blur_fusion_uint8`` (what a cut-out writes).

Each image: smooth random colours under a soft-edged, hair-fringed portrait-like alpha (a
disc with an 8 px soft edge and strands), alpha as uint8 as a saved mask. Rounds alternate
the order of the sides; medians reported; OpenCV keeps its default threads on both sides.
The largest differences: sodkit's float estimate vs the reference's float estimate (in 1/255
units), and the uint8 images (the reference truncates, sodkit rounds).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.metrics_speed import write_block  # noqa: E402
from sodkit.foreground import blur_fusion, blur_fusion_uint8  # noqa: E402


def restated(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The authors' formula on the whole image (float32), as their CPU function runs it."""
    img = image.astype(np.float32) / 255
    a = (alpha.astype(np.float32) / 255)[:, :, None]

    def one(fg: np.ndarray, bg: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
        blurred_a = cv2.blur(a, (radius, radius))[:, :, None]
        blurred_fg = cv2.blur(fg * a, (radius, radius)) / (blurred_a + 1e-5)
        blurred_bg = cv2.blur(bg * (1 - a), (radius, radius)) / ((1 - blurred_a) + 1e-5)
        out = blurred_fg + a * (img - a * blurred_fg - (1 - a) * blurred_bg)
        return np.clip(out, 0, 1), blurred_bg

    fg, bg = one(img, img, 90)
    return one(fg, bg, 6)[0]


def reference(birefnet: Path | None):
    """(float estimate, uint8 image) functions of the reference."""
    if birefnet is None:
        return restated, lambda image, alpha: (restated(image, alpha) * 255).astype(np.uint8)
    sys.path.insert(0, str(birefnet))
    module = importlib.import_module("image_proc")
    from PIL import Image

    def floats(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        return module.FB_blur_fusion_foreground_estimator_cpu_2(
            image.astype(np.float32) / 255.0, alpha.astype(np.float32) / 255.0, r=90)

    def uint8(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        return np.asarray(module.refine_foreground(Image.fromarray(image),
                                                   Image.fromarray(alpha), device="cpu"))
    return floats, uint8


def make(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    image = cv2.GaussianBlur(rng.integers(0, 256, (size, size, 3), dtype=np.uint8), (0, 0), 3)
    alpha = np.zeros((size, size), np.float32)
    cv2.circle(alpha, (size // 2, size * 3 // 5), size // 3, 1.0, -1)
    alpha = cv2.blur(alpha, (9, 9))
    for _ in range(40):
        angle = rng.uniform(0, 2 * np.pi)
        start = (int(size / 2 + size / 3 * np.cos(angle)), int(size * 3 / 5 + size / 3 *
                                                                   np.sin(angle)))
        end = (int(start[0] + size / 10 * np.cos(angle)), int(start[1] + size / 10 *
                                                              np.sin(angle)))
        cv2.line(alpha, start, end, float(rng.uniform(0.3, 0.9)), 1, cv2.LINE_AA)
    return image, np.round(np.clip(alpha, 0, 1) * 255).astype(np.uint8)


def _time(fn, *args) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def measure(size: int, rounds: int, ref) -> dict:
    image, alpha = make(size, size)
    ref_float, ref_uint8 = ref
    sides = {"reference": lambda: ref_uint8(image, alpha),
             "sodkit": lambda: blur_fusion_uint8(image, alpha)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    outputs = {}
    for round_ in range(rounds):
        for name in (list(sides) if round_ % 2 == 0 else list(sides)[::-1]):
            seconds, outputs[name] = _time(sides[name])
            times[name].append(seconds * 1000)
    float_diff = np.abs(blur_fusion(image, alpha) - ref_float(image, alpha)).max() * 255
    uint8_diff = np.abs(outputs["sodkit"].astype(int) - outputs["reference"].astype(int)).max()
    soft = float(((alpha > 0) & (alpha < 255)).mean())
    return {"size": size, "times": {k: statistics.median(v) for k, v in times.items()},
            "rounds": times, "float_diff": float(float_diff), "uint8_diff": int(uint8_diff),
            "soft": soft}


def report(results: list[dict], source: str) -> str:
    lines = [f"Reference: {source}. Median of the rounds, ms per image (uint8 result: the "
             "reference's `refine_foreground` PIL image, sodkit's `blur_fusion_uint8`).", "",
             "| size | soft alpha share | reference ms | sodkit ms | speed-up | largest float "
             "difference | largest uint8 difference |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        ref_ms, ours = r["times"]["reference"], r["times"]["sodkit"]
        lines.append(f"| {r['size']} x {r['size']} | {100 * r['soft']:.1f}% | {ref_ms:.1f} | "
                     f"{ours:.1f} | {ref_ms / ours:.1f}x | {r['float_diff']:.2e} / 255 | "
                     f"{r['uint8_diff']} / 255 |")
    rounds = "; ".join(f"{r['size']}: reference " + ", ".join(f"{v:.0f}" for v in
                       r["rounds"]["reference"]) + " / sodkit " + ", ".join(
                       f"{v:.0f}" for v in r["rounds"]["sodkit"]) for r in results)
    return "\n".join(lines) + f"\n\nEvery round (ms): {rounds}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--birefnet", type=Path, help="a local BiRefNet checkout (its "
                                                      "image_proc.py is the reference)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    source = ("BiRefNet's image_proc.refine_foreground(device='cpu'), imported from a local "
              "checkout" if args.birefnet else "the authors' formula restated (no --birefnet)")
    ref = reference(args.birefnet)
    results = [measure(size, args.rounds, ref) for size in args.sizes]
    text = report(results, source)
    print(text)
    if args.write:
        given = " --birefnet BiRefNet" if args.birefnet else ""
        header = (f"Command: `.venv/bin/python benchmarks/foreground_speed.py --sizes "
                  f"{' '.join(map(str, args.sizes))} --rounds {args.rounds}{given} --write` "
                  f"({platform.processor() or platform.machine()}, 2 shared cores, OpenCV "
                  f"{cv2.__version__} with {cv2.getNumThreads()} threads, Python "
                  f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}).\n\n")
        write_block("foreground_speed", "### Cut-out colours: blur-fusion foreground "
                    "estimation, BiRefNet's vs sodkit's\n\n" + header + text)


if __name__ == "__main__":
    main()
