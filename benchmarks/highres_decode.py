"""Decoding high-resolution JPEGs for training: full decode vs libjpeg's reduced-scale decode.

    python benchmarks/highres_decode.py [--side 3840x2160] [--repeats 15]

One generated photo-like JPEG (quality 90) is decoded by ``sodkit.imageio``: in full
(``read_image``), at the scale training picks for a 1024 and a 512 px target
(``read_image_reduced``: the largest of 1/2, 1/4, 1/8 that keeps both sides >= the target),
and as the full data check decodes it (``decoded_size``, 1/8). Each is timed ``--repeats``
times in one thread, the four in turn within each round; the median ms is printed as a
Markdown table (benchmarks/RESULTS.md), with the mean absolute difference (0-255) of each
reduced decode from the full one, both resized to the target with ``INTER_AREA``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from sodkit.imageio import decoded_size, read_image, read_image_reduced


def photo(height: int, width: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 255, (9, 16, 3)).astype(np.float32)
    image = cv2.resize(base, (width, height), interpolation=cv2.INTER_CUBIC)
    for _ in range(12):
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (int(rng.integers(40, width // 3)), int(rng.integers(40, height // 3)))
        cv2.ellipse(image, center, axes, float(rng.uniform(0, 180)), 0, 360,
                    [float(c) for c in rng.uniform(0, 255, 3)], -1)
    image += rng.normal(0, 6, image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def _medians(fns: list, repeats: int) -> list[float]:
    """Median ms of each function, timed in turn within every round (so that the load of a
    shared machine falls on all of them alike)."""
    for fn in fns:
        fn()  # warm the file cache and the decoder
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append((time.perf_counter() - start) * 1000)
    return [statistics.median(t) for t in times]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", default="3840x2160", help="WIDTHxHEIGHT of the JPEG")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    width, height = (int(v) for v in args.side.split("x"))
    cv2.setNumThreads(1)
    with tempfile.TemporaryDirectory(prefix="highres_decode_") as tmp:
        path = Path(tmp) / "photo.jpg"
        cv2.imwrite(str(path), photo(height, width), [cv2.IMWRITE_JPEG_QUALITY, 90])
        full = read_image(path)
        print(f"{width}x{height} JPEG, {path.stat().st_size / 1e6:.1f} MB, median of "
              f"{args.repeats}, one thread ({platform.machine()}, OpenCV {cv2.__version__})\n")
        targets = (1024, 512)
        fns = [lambda: read_image(path)] + [
            lambda t=t: read_image_reduced(path, (t, t)) for t in targets] + [
            lambda: decoded_size(path)]
        base, *reduced, check = _medians(fns, args.repeats)
        print("| decode | decoded size | ms | x faster | mean abs diff after resize |")
        print("|---|---|---:|---:|---:|")
        print(f"| full (`read_image`) | {full.shape[1]}x{full.shape[0]} | {base:.1f} | 1.0x | |")
        for target, ms in zip(targets, reduced, strict=True):
            image, factor = read_image_reduced(path, (target, target))
            a, b = (cv2.resize(x, (target, target), interpolation=cv2.INTER_AREA)
                    .astype(np.int16) for x in (full, image))
            print(f"| training at {target} px: 1/{factor} | {image.shape[1]}x{image.shape[0]} "
                  f"| {ms:.1f} | {base / ms:.1f}x | {np.abs(a - b).mean():.2f} |")
        print(f"| `check-data --full`: 1/8 | {-(-width // 8)}x{-(-height // 8)} | {check:.1f} | "
              f"{base / check:.1f}x | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
