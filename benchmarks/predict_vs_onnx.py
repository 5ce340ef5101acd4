"""``sodkit predict`` with its defaults against a bare onnxruntime loop (issue 35's benchmark):

    .venv/bin/python benchmarks/predict_vs_onnx.py --model demo-fpn minet-r50 --images 8 \\
        --threads 1 2 --rounds 2 [--write]

Both sides are real processes started the same way and timed from the start to the exit (wall
clock): ``sodkit predict --checkpoint CKPT PHOTOS --out OUT --threads N`` (everything else its
defaults: ``--runtime auto``, which is onnxruntime here, the default batch and decoding
workers), and ``python benchmarks/onnx_loop.py MODEL.onnx PHOTOS --out OUT --threads N`` (read,
resize, normalise, run, resize back, write a PNG, one image at a time) on the graph ``sodkit
export --onnx --dynamic`` writes for the same checkpoint (its sigmoid included). Figures: the
time a image with the start included (wall clock / images), and without it: the work on the
images as each side measures it itself (``sodkit predict``'s last progress line, from its first
batch to its last mask; the loop's own time without its session's creation), and the fixed
start (wall clock minus that). ``sodkit predict``'s graph is exported into its cache by one
untimed run before (the export happens once per model file). Conditions: a quiet machine, then
beside one CPU-bound process (``python -c "while True: pass"``), both sides beside the same
process. Random weights (speed does not depend on them); rendered photos of 320-640 px
(:mod:`sodkit.data.render`).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import MODELS  # noqa: E402

SIDES = ("sodkit predict", "bare onnxruntime loop")


def prepare(name: str, folder: Path, images: int) -> dict:
    """A checkpoint (random weights), its ``sodkit export`` graph, and the photos."""
    import cv2
    import numpy as np
    import torch

    from sodkit.config import load_config, to_dict
    from sodkit.data.render import render_sample
    from sodkit.engine.export import SaliencyModel, default_opset, export_onnx
    from sodkit.network import build_network

    recipe, overrides, _ = MODELS[name]
    cfg = load_config(ROOT / recipe, overrides)
    cfg = replace(cfg, model=replace(cfg.model, pretrained=None))
    torch.manual_seed(0)
    net = build_network(cfg.model, aux_outputs=False).eval()
    checkpoint = folder / "model.pt"
    torch.save({"model": build_network(cfg.model).state_dict() | net.state_dict(),
                "config": to_dict(cfg), "epoch": 1}, checkpoint)
    model = SaliencyModel(net).eval()
    onnx = folder / "model.onnx"
    size = (cfg.data.size, cfg.data.size)
    export_onnx(model, onnx, size, default_opset(model), dynamic=True)
    rng = np.random.default_rng(0)
    for count, sub in ((images, "all"), (1, "one")):
        (folder / sub).mkdir()
        for i in range(count):
            rgb = render_sample(rng, 320, 640)[0]
            cv2.imwrite(str(folder / sub / f"photo{i:02d}.jpg"), rgb[:, :, ::-1])
    return {"checkpoint": checkpoint, "onnx": onnx, "size": cfg.data.size,
            "mean": cfg.data.mean, "std": cfg.data.std}


def command(side: str, made: dict, photos: Path, out: Path, threads: int) -> list[str]:
    if side == "sodkit predict":
        return [str(ROOT / ".venv" / "bin" / "sodkit"), "predict", "--checkpoint",
                str(made["checkpoint"]), str(photos), "--out", str(out), "--threads",
                str(threads)]
    return [sys.executable, str(ROOT / "benchmarks" / "onnx_loop.py"), str(made["onnx"]),
            str(photos), "--out", str(out), "--size", str(made["size"]), str(made["size"]),
            "--threads", str(threads), "--mean", *map(str, made["mean"]),
            "--std", *map(str, made["std"])]


def timed(argv: list[str], env: dict, images: int) -> tuple[float, float]:
    """``(wall clock, seconds of work on the images as the side reports it)``."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: {done.stderr[-2000:]}")
    rate = re.search(r"predicting: done, .*, ([0-9.]+) (images/s|s/image)", done.stderr)
    if rate:  # sodkit predict's progress summary
        value = float(rate.group(1))
        return seconds, images / value if rate.group(2) == "images/s" else images * value
    loop = re.search(r"in ([0-9.]+) s .*session start ([0-9.]+) ms", done.stdout)
    if loop is None:
        raise SystemExit(f"{argv[:3]}: no timing in its output: {done.stdout[-500:]}")
    return seconds, float(loop.group(1)) - float(loop.group(2)) / 1e3


def measure(name: str, images: int, threads: list[int], rounds: int) -> dict:
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        made = prepare(name, folder, images)
        env = {**os.environ, "SODKIT_ONNX_CACHE": str(folder / "cache")}
        timed(command(SIDES[0], made, folder / "one", folder / "warm", 1), env, 1)  # export
        runs = 0
        for condition in ("quiet", "beside one CPU-bound process"):
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    if condition != "quiet" else None)
            try:
                for r in range(rounds):
                    for n in threads if r % 2 == 0 else threads[::-1]:
                        for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                            load = os.getloadavg()[0]
                            runs += 1
                            wall, work = timed(command(side, made, folder / "all",
                                                       folder / f"out{runs}", n), env, images)
                            results.setdefault((condition, n, side), []).append(
                                (wall, work, load))
                            print(name, condition, n, side, f"{wall:.2f} s, work {work:.2f} s, "
                                  f"load {load:.1f}", flush=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    return results


def report(name: str, results: dict, images: int) -> str:
    loads = [load for runs in results.values() for _, _, load in runs]
    lines = [f"#### {MODELS[name][2]}: {images} photos, load average {min(loads):.1f}-"
             f"{max(loads):.1f}", "",
             "| condition | threads | predict, a image with the start | bare loop, with the "
             "start | ratio | predict, a image without the start | bare loop, without | ratio "
             "| fixed start: predict / bare loop |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    conditions = list(dict.fromkeys(c for c, _, _ in results))
    threads = list(dict.fromkeys(n for _, n, _ in results))
    for c in conditions:
        for n in threads:
            cells = {}
            for side in SIDES:
                runs = results[(c, n, side)]
                cells[side] = (statistics.median(w for w, _, _ in runs) / images,
                               statistics.median(k for _, k, _ in runs) / images,
                               statistics.median(w - k for w, k, _ in runs))
            p, b = cells[SIDES[0]], cells[SIDES[1]]
            lines.append(f"| {c} | {n} | {p[0]:.3f} s | {b[0]:.3f} s | {b[0] / p[0]:.2f}x | "
                         f"{p[1]:.3f} s | {b[1]:.3f} s | {b[1] / p[1]:.2f}x | "
                         f"{p[2]:.1f} s / {b[2]:.1f} s |")
    each = "; ".join(f"{side}, {c}, {n}: " + ", ".join(f"{w:.2f}/{k:.2f}" for w, k, _ in runs)
                     for (c, n, side), runs in results.items())
    return ("\n".join(lines) + "\n\nRatio: the bare loop's time over predict's (>= 1.00x: "
            f"predict is as fast or faster). Each run (s, wall clock / work on the images): "
            f"{each}.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=list(MODELS), default=["demo-fpn"])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    import onnxruntime
    import torch
    from metrics_speed import write_block

    blocks = []
    for name in args.model:
        text = report(name, measure(name, args.images, args.threads, args.rounds), args.images)
        print(text, flush=True)
        blocks.append(text)
    if args.write:
        tag = "predict_vs_onnx_" + "_".join(m.replace("-", "_") for m in args.model)
        header = (f"Command: `.venv/bin/python benchmarks/predict_vs_onnx.py --model "
                  f"{' '.join(args.model)} --images {args.images} --threads "
                  f"{' '.join(map(str, args.threads))} --rounds {args.rounds} --write` "
                  f"({platform.machine()}, 2 shared cores, torch {torch.__version__}, "
                  f"onnxruntime {onnxruntime.__version__}, {time.strftime('%Y-%m-%d %H:%M')}; "
                  f"medians of the rounds).\n\n")
        write_block(tag, "### `sodkit predict` against a bare onnxruntime loop: "
                    + ", ".join(MODELS[m][2] for m in args.model) + "\n\n" + header
                    + "\n".join(blocks))


if __name__ == "__main__":
    main()
