"""Memory of ``sodkit predict`` on the CPU by batch size at a high input side, beside the batch
the command chooses itself, and the memory of the foreground estimate per pixel (#33 item 8,
#32 item 5).

    .venv/bin/python benchmarks/predict_memory.py --batches 1,2,4 --write

A checkpoint of the recipe's network with random weights (``model.pretrained=null``; memory
and time do not depend on the weights), photos of 1024x768 (JPEG). For each batch B,
``python -m sodkit predict --batch-size B`` on B photos (one batch) in a fresh process, then
the command with no ``--batch-size`` (the default) on one photo: the wall time per image and
the process's peak resident memory (its ``ru_maxrss``, read by ``wait4``). The default's
first line gives the batch it chose and the probe's figure per image. Then pymatting's
foreground estimate (``sodkit.foreground.estimate_foreground``) at 1, 4 and 16 megapixels, each
in a fresh process: the peak resident memory it adds, per pixel. The machine's cores are
shared with other work: times move with it, memory does not.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "predict_memory"
FOREGROUND = """
import sys, numpy as np
from sodkit.foreground import estimate_foreground, foreground_estimator
foreground_estimator()
side = int(float(sys.argv[1]) ** 0.5 * 1000)
image = np.random.default_rng(0).integers(0, 256, (side, side, 3), np.uint8)
alpha = np.random.default_rng(1).random((side, side), np.float32)
def kb(field):
    return [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(field)][0]
open("/proc/self/clear_refs", "w").write("5")
before = kb("VmRSS")
estimate_foreground(image, alpha)
print(side * side, (kb("VmHWM") - before) * 1024)
"""


def peak_of(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes, its output) of one process, started by fork and exec
    so that ``os.wait4`` reaps it and gives its own peak (``ru_maxrss``)."""
    start = time.perf_counter()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: stderr and stdout into the pipe, then the command
        os.close(read)
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.chdir(ROOT)
        os.execve(cmd[0], cmd, env)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{text}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024, text


def build(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path]:
    import cv2
    import numpy as np
    import torch

    from sodkit.config import load_config, to_dict
    from sodkit.network import build_network

    cfg = load_config(args.config, [f"model.backbone={args.backbone}", "model.pretrained=null",
                                    f"data.size={args.size}", "data_root=/tmp"])
    checkpoint = tmp / "model.pt"
    torch.save({"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)},
               checkpoint)
    photos = tmp / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    for i in range(max(map(int, args.batches.split(",")))):
        cv2.imwrite(str(photos / f"p{i}.jpg"), rng.integers(0, 256, (768, 1024, 3), np.uint8))
    return checkpoint, photos


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "general_birefnet_swinl.yaml"))
    parser.add_argument("--backbone", default="swin_tiny_patch4_window7_224")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batches", default="1,2,4")
    parser.add_argument("--megapixels", default="1,4,16")
    parser.add_argument("--write", action="store_true", help="into benchmarks/RESULTS.md")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows, lines = [], []
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        checkpoint, photos = build(args, tmp)
        base = [sys.executable, "-m", "sodkit", "predict", "--checkpoint", str(checkpoint),
                "--workers", "1"]
        every = sorted(photos.iterdir())
        for i, batch in enumerate([*map(int, args.batches.split(",")), 0]):
            given = [f"--batch-size={batch}"] if batch else []
            inputs = [str(p) for p in every[: batch or 1]]
            seconds, peak, text = peak_of([*base, "--out", str(tmp / f"out{i}"), *given,
                                           *inputs], env)
            chosen = re.search(r"batch \d+ \([^)]*\)", text)
            rows.append((str(batch) if batch else "default", chosen.group(0) if chosen else "?",
                         seconds / len(inputs), peak))
            print(rows[-1], flush=True)
        for megapixels in args.megapixels.split(","):
            out = subprocess.run([sys.executable, "-c", FOREGROUND, megapixels], env=env,
                                 capture_output=True, text=True, check=True, cwd=ROOT).stdout
            pixels, added = map(int, out.split())
            lines.append((megapixels, pixels, added))
            print(lines[-1], flush=True)
    report(args, rows, lines)


def report(args: argparse.Namespace, rows: list, lines: list) -> None:
    import torch

    network = f"birefnet/{args.backbone}" if "birefnet" in args.config else args.config
    text = [f"<!-- {MARK} -->", "### Memory of `sodkit predict` on the CPU, by batch",
            "", f"Command: `.venv/bin/python benchmarks/predict_memory.py --batches "
            f"{args.batches}` ({platform.machine()}, "
            f"{os.cpu_count()} shared cores, torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d')}).", "",
            f"{network}, random weights, at {args.size} px, photos of 1024x768, `--workers 1`, "
            f"each run a fresh process (`python -m sodkit predict`) on one batch (the default: "
            f"on one photo); the time includes the start (imports, checkpoint, build, probe):",
            "", "| --batch-size | what the first line says | s / image | peak resident memory |",
            "|---|---|---:|---:|"]
    text += [f"| {b} | {said} | {s:.1f} | {peak / 2**30:.2f} GiB |" for b, said, s, peak in rows]
    text += ["", "pymatting's foreground estimate (`--estimate-foreground`), fresh process each, "
             "the peak resident memory it adds:", "",
             "| megapixels | pixels | peak added | bytes / pixel |", "|---:|---:|---:|---:|"]
    text += [f"| {mp} | {px} | {added / 2**20:.0f} MiB | {added / px:.0f} |"
             for mp, px, added in lines]
    text.append(f"<!-- /{MARK} -->")
    block = "\n".join(text)
    print(block)
    if args.write:
        results = ROOT / "benchmarks" / "RESULTS.md"
        current = results.read_text()
        pattern = re.compile(rf"<!-- {MARK} -->.*<!-- /{MARK} -->", re.S)
        results.write_text(pattern.sub(block, current) if pattern.search(current)
                           else current.rstrip() + "\n\n" + block + "\n")


if __name__ == "__main__":
    main()
