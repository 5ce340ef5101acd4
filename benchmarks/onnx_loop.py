"""A bare onnxruntime loop over a folder of photos: the reference that ``sodkit predict`` is
measured against (issue 35's benchmark). What a user writes who runs ``sodkit export --onnx``'s
file with onnxruntime and OpenCV, one image at a time, nothing else:

    .venv/bin/python benchmarks/onnx_loop.py MODEL.onnx PHOTOS/ --out MASKS/ [--size H W] \\
        [--threads N] [--mean R G B --std R G B]

Per image: read (OpenCV, to RGB), resize to the model's input size (``INTER_AREA`` when
shrinking, else bilinear), normalise (ImageNet's mean and std unless given), run, resize the
probabilities back to the photo's size (bilinear), write an 8-bit PNG named after the photo.
``--size`` is needed only when the graph's height and width are symbolic (``--dynamic``).
``--threads``: onnxruntime's intra-op threads (its inter-op pool: 1; default: onnxruntime's
own choice, one per physical core). Prints one line: images, seconds, images/s and the median
per image; :func:`run_loop` returns the same figures to a benchmark that imports it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


def session(path: Path, threads: int | None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def input_size(sess, size: tuple[int, int] | None) -> tuple[int, int]:
    """``size``, else the graph's own (fixed) height and width."""
    shape = sess.get_inputs()[0].shape
    if size is not None:
        return size
    if isinstance(shape[2], int) and isinstance(shape[3], int):
        return shape[2], shape[3]
    raise SystemExit("the graph's height and width are symbolic: give --size H W")


def photos(source: Path) -> list[Path]:
    if source.is_file():
        return [source]
    return sorted(p for p in source.iterdir() if p.suffix.lower() in SUFFIXES)


def predict_one(sess, path: Path, out: Path, size: tuple[int, int], mean: np.ndarray,
                std: np.ndarray) -> None:
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise SystemExit(f"{path}: not an image OpenCV reads")
    rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    height, width = rgb.shape[:2]
    shrink = size[0] * size[1] < height * width
    resized = cv2.resize(rgb, (size[1], size[0]),
                         interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)
    x = ((resized.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1)[None]
    prob = sess.run(None, {sess.get_inputs()[0].name: np.ascontiguousarray(x)})[0][0, 0]
    prob = cv2.resize(prob, (width, height), interpolation=cv2.INTER_LINEAR)
    mask = np.clip(prob * 255.0 + 0.5, 0, 255).astype(np.uint8)
    if not cv2.imwrite(str(out / f"{path.stem}.png"), mask):
        raise SystemExit(f"{out / path.stem}.png: could not be written")


def run_loop(model: Path, source: Path, out: Path, size: tuple[int, int] | None = None,
             threads: int | None = None, mean=IMAGENET_MEAN, std=IMAGENET_STD) -> dict:
    """Every photo of ``source`` through ``model``; the figures of the run (the session's
    start included in ``seconds``, as a command's would be, and also given alone)."""
    start = time.perf_counter()
    sess = session(model, threads)
    load = time.perf_counter() - start
    hw = input_size(sess, size)
    out.mkdir(parents=True, exist_ok=True)
    mean_a = np.asarray(mean, np.float32)
    std_a = np.asarray(std, np.float32)
    per_image = []
    for path in photos(source):
        t = time.perf_counter()
        predict_one(sess, path, out, hw, mean_a, std_a)
        per_image.append(time.perf_counter() - t)
    seconds = time.perf_counter() - start
    return {"images": len(per_image), "seconds": seconds, "session_start": load,
            "images_per_s": len(per_image) / seconds if seconds else 0.0,
            "median_per_image": statistics.median(per_image) if per_image else 0.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="an .onnx file from sodkit export --onnx")
    parser.add_argument("source", type=Path, help="a photo or a folder of photos")
    parser.add_argument("--out", type=Path, required=True, help="folder for the PNG masks")
    parser.add_argument("--size", type=int, nargs=2, metavar=("H", "W"))
    parser.add_argument("--threads", type=int, help="onnxruntime intra-op threads")
    parser.add_argument("--mean", type=float, nargs=3, default=IMAGENET_MEAN)
    parser.add_argument("--std", type=float, nargs=3, default=IMAGENET_STD)
    args = parser.parse_args(argv)
    r = run_loop(args.model, args.source, args.out, tuple(args.size) if args.size else None,
                 args.threads, args.mean, args.std)
    print(f"{r['images']} images in {r['seconds']:.2f} s ({r['images_per_s']:.2f} images/s, "
          f"median {r['median_per_image'] * 1e3:.1f} ms per image, session start "
          f"{r['session_start'] * 1e3:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
