"""``sodkit predict`` on a clip vs on the same frames as PNG images: frames/s, side by side.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/video_speed.py --frames 120 --rounds 5 --write

Writes a synthetic clip (``--frames`` frames of ``--height`` x ``--width``, a disc moving on a
gradient, FFV1 in .avi so that the decoded frames are the written ones) and the same frames as
PNG files, and a checkpoint of the recipe's network (random weights: speed does not depend on
them). Each round runs, in this process and in alternating order (odd rounds start with the
clip), ``sodkit predict`` with ``--save mask,cutout`` on the clip (the frames decoded by one
thread ahead, each frame's outputs made by one thread beside the forward passes, a lossless
FFV1 mask video and PNG cut-outs written) and on the PNG folder (``--workers`` decoding
processes, the output thread: the path every image takes). The figure of interest: the clip's
frames/s against the folder's (1.0: a video costs what its frames as images cost). The cores are
shared with other work: the load average before each round is listed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_speed import write_block  # noqa: E402
from predict_speed import cpu_seconds  # noqa: E402

from sodkit.cli import main as sodkit_main  # noqa: E402
from sodkit.config import load_config, to_dict  # noqa: E402
from sodkit.network import build_network  # noqa: E402


def write_clip(folder: Path, frames: int, height: int, width: int) -> tuple[Path, Path]:
    """The clip and the folder of its frames as PNG files (the same pixels)."""
    clip, stills = folder / "clip.avi", folder / "frames"
    stills.mkdir(parents=True)
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"FFV1"), 25.0, (width, height))
    base = np.linspace(0, 160, width, dtype=np.uint8)[None, :, None].repeat(height, 0)
    for i in range(frames):
        frame = np.ascontiguousarray(base.repeat(3, 2))
        cv2.circle(frame, (width // 8 + 7 * i % (width // 2), height // 2), height // 5,
                   (40, 190, 240), -1)
        writer.write(frame)
        cv2.imwrite(str(stills / f"{i:06d}.png"), frame)
    writer.release()
    return clip, stills


def run(checkpoint: Path, source: Path, out: Path, args: argparse.Namespace
        ) -> tuple[float, float]:
    """Seconds (wall, CPU of this process and its ended children) of one command."""
    shutil.rmtree(out, ignore_errors=True)
    cpu, start = cpu_seconds(), time.perf_counter()
    code = sodkit_main(["predict", str(source), "--checkpoint", str(checkpoint), "--out",
                        str(out), "--save", "mask,cutout", "--batch-size",
                        str(args.batch_size), "--workers", str(args.workers), "--tta"])
    if code != 0:
        raise SystemExit(f"sodkit predict exited {code}")
    return time.perf_counter() - start, cpu_seconds() - cpu


def measure(args: argparse.Namespace, tmp: Path) -> list[dict]:
    cfg = load_config(args.config, [f"data.size={args.size}"])
    torch.manual_seed(0)
    net = build_network(replace(cfg.model, pretrained=None))
    checkpoint = tmp / "model.pt"
    torch.save({"model": net.state_dict(), "config": to_dict(cfg)}, checkpoint)
    clip, stills = write_clip(tmp, args.frames, args.height, args.width)
    run(checkpoint, clip, tmp / "warm", args)  # imports, caches
    rounds = []
    for index in range(args.rounds):
        load = os.getloadavg()[0]
        order = [("clip", clip), ("frames", stills)]
        times = {}
        for name, source in (order if index % 2 == 0 else order[::-1]):
            times[name] = run(checkpoint, source, tmp / f"out-{name}", args)
        rounds.append({"load": load, **{f"{k}_wall": v[0] for k, v in times.items()},
                       **{f"{k}_cpu": v[1] for k, v in times.items()}})
        print(f"round {index + 1}: load {load:.1f}, clip {times['clip'][0]:.2f} s, frames "
              f"{times['frames'][0]:.2f} s", flush=True)
    return rounds


def report(rounds: list[dict], args: argparse.Namespace) -> str:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    n, loads = args.frames, [r["load"] for r in rounds]
    clip, frames = median("clip_wall"), median("frames_wall")
    return "\n".join([
        f"{n} frames of {args.width}x{args.height}, fpn/resnet18 at {args.size} px (random "
        f"weights), `--save mask,cutout`, batch {args.batch_size}, `--workers {args.workers}` "
        f"for the PNG folder, cpu, {torch.get_num_threads()} torch thread(s); median of "
        f"{len(rounds)} rounds (load average {min(loads):.1f}-{max(loads):.1f} on "
        f"{os.cpu_count()} cores):", "",
        "| input | seconds | frames/s | CPU seconds |", "|---|---:|---:|---:|",
        f"| the clip (`sodkit predict clip.avi`) | {clip:.2f} | {n / clip:.1f} | "
        f"{median('clip_cpu'):.2f} |",
        f"| its frames as PNG images (`sodkit predict frames/`) | {frames:.2f} | "
        f"{n / frames:.1f} | {median('frames_cpu'):.2f} |", "",
        "Each round (load average before it): " + ", ".join(
            f"clip {r['clip_wall']:.2f} s / frames {r['frames_wall']:.2f} s ({r['load']:.1f})"
            for r in rounds) + "."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rounds = measure(args, Path(tmp))
    text = report(rounds, args)
    print(text)
    if args.write:
        header = (f"Command: `OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '')} "
                  f".venv/bin/python benchmarks/video_speed.py --frames {args.frames} --rounds "
                  f"{args.rounds} --write` ({platform.machine()}, shared cores, Python "
                  f"{platform.python_version()}, torch {torch.__version__}, "
                  f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).\n\n")
        write_block("video_speed", "### `sodkit predict` on a clip vs on its frames as "
                    "images\n\n" + header + text + "\n")


if __name__ == "__main__":
    main()
