"""``sodkit predict`` on a folder of photos vs the bare forward passes on the same resized tensors.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/predict_speed.py --workers 1 --rounds 9 --write

Generates ``--images`` photos of mixed sizes (the demo's renderer, sides from 240 to 640 px, JPEG)
and a checkpoint of the recipe's network (random weights: speed does not depend on them). Each
round times, side by side in this process, in alternating order (odd rounds start with the
command, even rounds with the bare passes, so that neither always runs in the other's wake):

* ``sodkit predict`` on the folder, the whole command as a user runs it (checkpoint read, network
  build, decoding, resizing, the forward passes, the resize back to each photo's size, PNG
  encoding and writing), with ``--workers`` decoding processes, called in this process (its
  imports already done: what a command adds to its forward passes, which is the issue's
  question);
* the bare forward passes of the same network on the same resized, normalised tensors, made
  before the clock starts, in batches of the same size, with the same intra-op threads (sigmoid
  included, nothing written);
* for the record, two rows that the ratio leaves out: the same command on one photo (its fixed
  cost: checkpoint read, build, first batch) and the same command as a new process
  (``python -m sodkit predict``: the interpreter's start and the imports of torch, timm and
  sodkit come on top, about the same whatever the folder).

The ratio is bare time / predict time (1.0: predict costs nothing beyond the forward passes),
the median of the rounds' own ratios; each round's ratio and the machine's load average (1 min)
before it are listed. The CPU seconds (this process's threads and the decoding processes) show
how much work each side did: where wall time equals CPU time, the run had one core's worth and
nothing could overlap (Linux shares the CPU between sessions, so a busy machine gives a session
about one core whatever its threads). The cores are shared with other work, so the figures
move with it. Both
sides use the same intra-op threads (sodkit's default, or ``OMP_NUM_THREADS``): on a loaded
2-core machine two threads spin-wait at every operator and made the forward passes 3-5x slower
than one thread, so there ``OMP_NUM_THREADS=1`` with ``--workers 1`` gives the steadier figures.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
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

from sodkit.cli import main as sodkit_main  # noqa: E402
from sodkit.config import load_config, to_dict  # noqa: E402
from sodkit.data.render import render_sample  # noqa: E402
from sodkit.engine.runtime import OnDevice  # noqa: E402
from sodkit.imageio import read_image  # noqa: E402
from sodkit.inference.forward import eval_mode, predict_probabilities  # noqa: E402
from sodkit.inference.pipelines import build_test_transform  # noqa: E402
from sodkit.network import build_network  # noqa: E402
from sodkit.resources import default_threads  # noqa: E402


def write_photos(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        image, _ = render_sample(np.random.default_rng([7, i]), min_side=240, max_side=640)
        path = folder / f"{i:05d}.jpg"
        cv2.imwrite(str(path), cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
                    [cv2.IMWRITE_JPEG_QUALITY, 92])
        paths.append(path)
    return paths


def cpu_seconds() -> float:
    """CPU time of this process (all its threads) and of its ended children (the decoding
    workers, once joined)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def bare_forward(net: torch.nn.Module, batches: list[torch.Tensor], device: torch.device
                 ) -> tuple[float, float]:
    """Seconds (wall, CPU) for the forward passes (and sigmoid) of every batch, on tensors made
    before."""
    local = OnDevice(device)
    cpu, start = cpu_seconds(), time.perf_counter()
    with eval_mode(net):
        for batch in batches:
            predict_probabilities(net, batch.to(device, non_blocking=True), local)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, cpu_seconds() - cpu


def predict_args(checkpoint: Path, photos: Path, out: Path, args: argparse.Namespace
                 ) -> list[str]:
    return ["predict", str(photos), "--checkpoint", str(checkpoint), "--out", str(out),
            "--workers", str(args.workers), "--batch-size", str(args.batch_size),
            "--device", args.device, "--tta"]  # --tta alone: none, as the bare passes


def predict_command(checkpoint: Path, photos: Path, out: Path, args: argparse.Namespace
                    ) -> tuple[float, float]:
    """Seconds (wall, CPU: its threads and its decoding processes) of the command."""
    shutil.rmtree(out, ignore_errors=True)
    cpu, start = cpu_seconds(), time.perf_counter()
    code = sodkit_main(predict_args(checkpoint, photos, out, args))
    if code != 0:
        raise SystemExit(f"sodkit predict exited {code}")
    return time.perf_counter() - start, cpu_seconds() - cpu


def predict_process(checkpoint: Path, photos: Path, out: Path, args: argparse.Namespace) -> float:
    """The same command as a new process: what a user waits for, interpreter and imports too."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sodkit", *predict_args(checkpoint, photos, out, args)],
                   check=True, env=env, capture_output=True)
    return time.perf_counter() - start


def measure(args: argparse.Namespace, tmp: Path) -> dict:
    cfg = load_config(args.config, [f"data.size={args.size}"] if args.size else [])
    torch.manual_seed(0)
    net = build_network(replace(cfg.model, pretrained=None))
    checkpoint = tmp / "model.pt"
    torch.save({"model": net.state_dict(), "config": to_dict(cfg)}, checkpoint)
    paths = write_photos(tmp / "photos", args.images)
    one = tmp / "one"
    one.mkdir()
    shutil.copy(paths[0], one / paths[0].name)
    transform = build_test_transform(cfg.data)
    tensors = [transform(read_image(p)) for p in paths]
    batches = [torch.stack(tensors[i : i + args.batch_size])
               for i in range(0, len(tensors), args.batch_size)]
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available()
                          else "cpu" if args.device == "auto" else args.device)
    torch.set_num_threads(default_threads())  # what sodkit predict's runtime sets
    net = net.to(device)
    bare_forward(net, batches[:2], device)  # warm-up: kernels chosen, caches filled
    predict_command(checkpoint, tmp / "photos", tmp / "warm", args)
    rounds = []
    for index in range(args.rounds):
        load = os.getloadavg()[0]
        if index % 2 == 0:
            ours, ours_cpu = predict_command(checkpoint, tmp / "photos", tmp / "out", args)
            bare, bare_cpu = bare_forward(net, batches, device)
        else:
            bare, bare_cpu = bare_forward(net, batches, device)
            ours, ours_cpu = predict_command(checkpoint, tmp / "photos", tmp / "out", args)
        fixed = predict_command(checkpoint, one, tmp / "out-one", args)[0]
        process = (math.nan if args.no_process else
                   predict_process(checkpoint, tmp / "photos", tmp / "out-process", args))
        rounds.append({"predict": ours, "bare": bare, "ratio": bare / ours, "load": load,
                       "fixed": fixed, "process": process, "process_ratio": bare / process,
                       "predict_cpu": ours_cpu, "bare_cpu": bare_cpu})
        print(f"round {index + 1}: load {load:.1f}, bare {bare:.2f} s (CPU {bare_cpu:.2f}), "
              f"predict {ours:.2f} s (CPU {ours_cpu:.2f}), ratio {bare / ours:.2f}x; one photo "
              f"{fixed:.2f} s, new process {process:.2f} s", flush=True)
    sizes = [read_image(p).shape[:2] for p in paths[:50]]
    return {"rounds": rounds, "device": str(device), "threads": torch.get_num_threads(),
            "network": f"{cfg.model.name}/{cfg.model.backbone}", "size": cfg.data.size,
            "sides": (min(min(s) for s in sizes), max(max(s) for s in sizes))}


def report(result: dict, args: argparse.Namespace) -> str:
    rounds, n = result["rounds"], args.images

    def median(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    bare, ours, process = median("bare"), median("predict"), median("process")
    loads = [r["load"] for r in rounds]
    lines = [
        f"{n} photos (sides {result['sides'][0]}-{result['sides'][1]} px in the first 50, JPEG), "
        f"{result['network']} at {result['size']}x{result['size']}, batch {args.batch_size}, "
        f"`--workers {args.workers}`, {result['device']}, {result['threads']} torch "
        f"thread{'s' if result['threads'] != 1 else ''}; "
        f"median of {len(rounds)} rounds (load average {min(loads):.1f}-{max(loads):.1f} on "
        f"{os.cpu_count()} cores):", "",
        "| what | seconds | images/s | bare / this | CPU seconds |", "|---|---:|---:|---:|---:|",
        f"| bare forward passes on the resized tensors | {bare:.2f} | {n / bare:.1f} | 1.00x | "
        f"{median('bare_cpu'):.2f} |",
        f"| **`sodkit predict` on the folder (whole command)** | {ours:.2f} | {n / ours:.1f} | "
        f"**{median('ratio'):.2f}x** | {median('predict_cpu'):.2f} |",
        f"| the same command on one photo (its fixed cost) | {median('fixed'):.2f} | | | |",
        f"| the same command as a new process (`python -m sodkit predict`) | {process:.2f} | "
        f"{n / process:.1f} | {median('process_ratio'):.2f}x | |", "",
        "Each round's ratio (load average before it): " + ", ".join(
            f"{r['ratio']:.2f}x ({r['load']:.1f})" for r in rounds) + ".",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--size", type=int, help="network input side (default: the recipe's)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-process", action="store_true",
                        help="leave out the new-process row (quicker rounds)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="predict_speed-"))
    try:
        text = report(measure(args, tmp), args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(text)
    if args.write:
        omp = os.environ.get("OMP_NUM_THREADS")
        command = " ".join([*([f"OMP_NUM_THREADS={omp}"] if omp else []), ".venv/bin/python",
                            "benchmarks/predict_speed.py", *sys.argv[1:]])
        machine = platform.processor() or platform.machine()
        header = (f"Command: `{command}` ({machine}, 2 shared cores, Python "
                  f"{platform.python_version()}, "
                  f"torch {torch.__version__}, {time.strftime('%Y-%m-%d')}).\n\n")
        write_block("predict_speed", "### `sodkit predict` vs the bare forward passes\n\n"
                    + header + text)


if __name__ == "__main__":
    main()
