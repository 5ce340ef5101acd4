"""Start-up of ``sodkit predict`` on one image (#35 item 6): the seconds from the process's start
to its first forward pass at the network's input size, and to its exit, for this checkout's
code against an earlier commit's, side by side in one run (rounds alternate which goes first).

    .venv/bin/python benchmarks/startup.py --before b697b29 --rounds 5 --write

Both sides run in fresh processes of this checkout's interpreter and packages (torch, timm: the
same); the earlier side's ``sodkit`` is ``git archive REF sodkit`` put first on ``PYTHONPATH``.
The models are model files (``sodkit.model_file``, as ``sodkit export --model`` writes them)
of each recipe's network with random weights (``model.pretrained=null``): the demo FPN
(ResNet-18, 160 px), MINet-R50 (320 px), BiRefNet Swin-T (1024 px). The image: one 640x480
JPEG. A forward pre-hook (``torch.nn.modules.module.register_module_forward_pre_hook``) notes
when the first module receives a (1, 3, size, size) input: the forward on the photo, not the
memory probe's smaller one. ``--stop-at-forward NAME``: that model's process ends there (the
BiRefNet forward at 1024 px, 45-100 s here, is the same code on both sides).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "startup"
MODELS = {  # name: (recipe, overrides)
    "demo": ("configs/demo.yaml", []),
    "minet-r50": ("configs/duts_minet_r50.yaml", []),
    "birefnet-swin-t": ("configs/general_birefnet_swinl.yaml",
                        ["model.backbone=swin_tiny_patch4_window7_224"]),
}
CHILD = r"""
import sys, time
origin, stop, size, note = float(sys.argv[1]), sys.argv[2] == "stop", int(sys.argv[3]), sys.argv[4]
sys.argv = ["sodkit", *sys.argv[5:]]
import torch
from torch.nn.modules.module import register_module_forward_pre_hook

class Stop(BaseException):
    pass

def first_forward(module, args):
    x = args[0] if args else None
    if isinstance(x, torch.Tensor) and x.dim() == 4 and tuple(x.shape[1:]) == (3, size, size):
        import sodkit
        with open(note, "w") as fh:
            fh.write(f"{time.time() - origin} {time.process_time()} {sodkit.__file__}")
        handle.remove()
        if stop:
            raise Stop

handle = register_module_forward_pre_hook(first_forward)
from sodkit.cli import console_main  # what the sodkit command runs (its exit included)
try:
    code = console_main()
except Stop:
    code = 0
sys.exit(code)
"""


def build_models(names: list[str], tmp: Path) -> dict[str, tuple[Path, int]]:
    """Each model's file and input side (random weights, the project's own model files)."""
    import torch

    from sodkit.config import load_config, to_dict
    from sodkit.model_file import write_model_file
    from sodkit.network import build_network

    out = {}
    for name in names:
        recipe, overrides = MODELS[name]
        cfg = load_config(str(ROOT / recipe), ["model.pretrained=null", "data_root=/tmp",
                                               *overrides])
        torch.manual_seed(0)
        weights = build_network(cfg.model).state_dict()
        path = write_model_file(tmp / f"{name}.safetensors", weights, to_dict(cfg),
                                {"source": "random weights (benchmarks/startup.py)",
                                 "weights": "model"})
        out[name] = (path, cfg.data.size)
        del weights
    return out


def checkout(ref: str, tmp: Path) -> Path:
    """``sodkit`` as it was at ``ref``, in a folder to put first on ``PYTHONPATH``."""
    folder = tmp / "before"
    folder.mkdir()
    archive = subprocess.run(["git", "archive", ref, "sodkit"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def one_run(side: Path, model: Path, size: int, image: Path, tmp: Path, stop: bool
            ) -> tuple[float, float, float, bytes]:
    """(seconds to the first forward, the process's CPU seconds until then, seconds to the
    exit, the mask's PNG bytes: none when stopped) of one fresh ``sodkit predict``."""
    note = tmp / "note"
    note.unlink(missing_ok=True)
    out = tmp / "out"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(side), "SODKIT_CACHE": str(tmp / "cache")}
    origin = time.time()
    done = subprocess.run([sys.executable, "-c", CHILD, repr(origin), "stop" if stop else "go",
                           str(size), str(note), "predict", str(image), "--checkpoint",
                           str(model), "--out", str(out)], env=env, capture_output=True,
                          text=True, cwd=tmp)
    total = time.time() - origin
    if done.returncode or not note.exists():
        raise SystemExit(f"predict failed ({side}):\n{done.stdout}{done.stderr}")
    seconds, cpu, module = note.read_text().split(" ", 2)
    if not module.startswith(str(side)):
        raise SystemExit(f"{side}: sodkit came from {module}")
    mask = out / f"{image.stem}.png"
    return float(seconds), float(cpu), total, mask.read_bytes() if mask.exists() else b""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="the commit to compare against")
    parser.add_argument("--models", default="demo,minet-r50,birefnet-swin-t")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stop-at-forward", default="birefnet-swin-t",
                        help="models whose runs end at their first forward (comma-separated)")
    parser.add_argument("--write", action="store_true", help="into benchmarks/RESULTS.md")
    args = parser.parse_args()
    names = args.models.split(",")
    stops = set(args.stop_at_forward.split(","))
    loads = [os.getloadavg()[0]]
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        sides = {"before": checkout(args.before, tmp), "after": ROOT}
        models = build_models(names, tmp)
        image = tmp / "photo.jpg"
        _photo(image)
        for r in range(args.rounds):
            for name in names:
                path, size = models[name]
                for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    got = one_run(sides[side], path, size, image, tmp, name in stops)
                    results.setdefault((name, side), []).append(got)
                    print(f"round {r + 1} {name} {side}: first forward {got[0]:.2f} s "
                          f"({got[1]:.2f} CPU s), exit {got[2]:.2f} s (load "
                          f"{os.getloadavg()[0]:.1f})", flush=True)
            loads.append(os.getloadavg()[0])
        for name in names:  # the same masks, byte for byte, on both sides
            masks = {got[3] for side in ("before", "after") for got in results[(name, side)]}
            if len(masks) != 1:
                raise SystemExit(f"{name}: the masks differ between the rounds or the sides")
    text = report(args, names, stops, results, loads)
    print(text)
    if args.write:
        write_section(text)


def _photo(path: Path) -> None:
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    small = rng.integers(0, 256, (60, 80, 3), np.uint8)
    cv2.imwrite(str(path), cv2.resize(small, (640, 480)))


def report(args: argparse.Namespace, names: list[str], stops: set[str],
           results: dict, loads: list[float]) -> str:
    import torch

    before = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    lines = [f"<!-- {MARK} -->", "### Start-up of `sodkit predict` on one image",
             "", f"Command: `.venv/bin/python benchmarks/startup.py --before {args.before} "
             f"--models {args.models} --rounds {args.rounds}` ({platform.machine()}, "
             f"{os.cpu_count()} shared cores, torch {torch.__version__}, "
             f"{time.strftime('%Y-%m-%d %H:%M')} UTC, load average {min(loads):.1f}-"
             f"{max(loads):.1f}). Before: commit {before}; after: this checkout. Median of "
             f"{args.rounds} fresh processes each, alternating; seconds from the process's "
             f"start to its first forward pass on the photo (wall, and the CPU time of the "
             f"command's process until then: less moved by the other sessions' load), and to its "
             f"exit:", "",
             "| model | first forward, before | after | CPU s until then, before | after | "
             "exit, before | after |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        b, a = results[(name, "before")], results[(name, "after")]

        def med(rows: list, i: int) -> float:
            return statistics.median(row[i] for row in rows)

        exits = ("(stopped)", "(stopped)") if name in stops else (
            f"{med(b, 2):.2f}", f"{med(a, 2):.2f}")
        lines.append(f"| {name} | {med(b, 0):.2f} | **{med(a, 0):.2f}** | {med(b, 1):.2f} | "
                     f"**{med(a, 1):.2f}** | {exits[0]} | {exits[1]} |")
    lines += ["", "The masks are the same bytes on both sides (the script stops otherwise; "
              "the runs stopped at their first forward write none).", "",
              "Each round's seconds to the first forward, before / after (the first round "
              "of each side starts with an empty cache folder):", ""]
    for name in names:
        pairs = zip(results[(name, "before")], results[(name, "after")], strict=True)
        lines.append(f"- {name}: " + ", ".join(f"{b[0]:.2f} / {a[0]:.2f}" for b, a in pairs))
    lines.append(f"<!-- /{MARK} -->")
    return "\n".join(lines)


def write_section(block: str) -> None:
    results = ROOT / "benchmarks" / "RESULTS.md"
    text = results.read_text()
    pattern = re.compile(rf"<!-- {MARK} -->.*<!-- /{MARK} -->", re.S)
    results.write_text(pattern.sub(lambda _: block, text) if pattern.search(text)
                       else text.rstrip("\n") + "\n\n" + block + "\n")


if __name__ == "__main__":
    main()
