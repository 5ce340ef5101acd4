"""Threads that survive load (issue 35 item 4): one forward's time with PyTorch and onnxruntime
at 1 and 2 intra-op threads, on a quiet machine and beside one CPU-bound process
(``python -c "while True: pass"``), each variant in its own process (thread pools and
``OMP_WAIT_POLICY`` are fixed when a process starts):

    .venv/bin/python benchmarks/threads_under_load.py --model demo-fpn minet-r50 --rounds 5 \\
        [--write]

Variants: PyTorch 1 thread; PyTorch 2 threads (its OpenMP pool as it comes, threads spinning
while they wait); PyTorch 2 threads with ``OMP_WAIT_POLICY=PASSIVE``; onnxruntime 1 thread;
onnxruntime 2 threads with its pool spinning (onnxruntime's default) and without
(``session.intra_op.allow_spinning`` 0, what ``sodkit predict`` sets). Random weights (speed
does not depend on them), batch 1 at the recipe's size, the graph exported once by
:func:`sodkit.engine.export.export_onnx`. Each variant's process warms up once, then times
``--rounds`` forwards; the figure is their median. The busy process runs through the whole of
its condition, both runtimes beside the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import MODELS  # noqa: E402

VARIANTS = {  # name: (runtime, threads, environment, allow spinning)
    "PyTorch, 1 thread": ("torch", 1, {}, None),
    "PyTorch, 2 threads": ("torch", 2, {}, None),
    "PyTorch, 2 threads, OMP_WAIT_POLICY=PASSIVE": ("torch", 2, {"OMP_WAIT_POLICY": "PASSIVE"},
                                                    None),
    "onnxruntime, 1 thread": ("onnx", 1, {}, False),
    "onnxruntime, 2 threads, spinning": ("onnx", 2, {}, True),
    "onnxruntime, 2 threads, no spinning": ("onnx", 2, {}, False),
}


def network(name: str):
    from dataclasses import replace

    import torch

    from sodkit.config import load_config
    from sodkit.engine.export import SaliencyModel
    from sodkit.network import build_network

    recipe, overrides, _ = MODELS[name]
    cfg = load_config(ROOT / recipe, overrides)
    torch.manual_seed(0)
    net = build_network(replace(cfg.model, pretrained=None), aux_outputs=False).eval()
    return SaliencyModel(net).eval(), cfg.data.size


def worker(args: argparse.Namespace) -> None:
    """One variant in this process: warm up, then time ``rounds`` forwards (JSON on stdout)."""
    import numpy as np

    runtime, threads, _, spinning = VARIANTS[args.variant]
    model, size = network(args.model)
    x = np.random.default_rng(0).standard_normal((1, 3, size, size), dtype=np.float32)
    if runtime == "torch":
        import torch

        torch.set_num_threads(threads)

        def run() -> None:
            with torch.inference_mode():
                model(torch.from_numpy(x))
    else:
        import onnxruntime as ort

        from sodkit.inference.onnx_network import session_options

        session = ort.InferenceSession(args.onnx, session_options(threads, spinning),
                                       providers=["CPUExecutionProvider"])

        def run() -> None:
            session.run(None, {"image": x})
    run()
    times = []
    for _ in range(args.rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(json.dumps(times))


def measure(name: str, rounds: int) -> dict:
    from sodkit.engine.export import export_onnx

    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        model, size = network(name)
        onnx = Path(tmp) / "model.onnx"
        export_onnx(model, onnx, (size, size), 17, dynamic=True)
        for condition in ("quiet", "beside one CPU-bound process"):
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    if condition != "quiet" else None)
            try:
                for variant, (_, _, env, _) in VARIANTS.items():
                    load = os.getloadavg()[0]
                    out = subprocess.run(
                        [sys.executable, __file__, "--worker", variant, "--model", name,
                         "--onnx", str(onnx), "--rounds", str(rounds)],
                        env={**os.environ, **env}, capture_output=True, text=True, check=True)
                    times = json.loads(out.stdout.strip().splitlines()[-1])
                    results[(condition, variant)] = (times, load)
                    print(name, condition, variant, f"{statistics.median(times):.3f} s",
                          f"load {load:.1f}", flush=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
    return results


def report(name: str, results: dict, rounds: int) -> str:
    conditions = list(dict.fromkeys(c for c, _ in results))
    loads = [load for _, load in results.values()]
    lines = [f"#### {MODELS[name][2]}, batch 1, median of {rounds} forwards, load average "
             f"{min(loads):.1f}-{max(loads):.1f}", "",
             "| variant | " + " | ".join(conditions) + " | slowdown beside the busy process |",
             "|---|" + "---:|" * (len(conditions) + 1)]
    for variant in VARIANTS:
        cells = [statistics.median(results[(c, variant)][0]) for c in conditions]
        lines.append(f"| {variant} | " + " | ".join(f"{t:.3f} s" for t in cells)
                     + f" | {cells[-1] / cells[0]:.1f}x |")
    each = "; ".join(f"{v}, {c}: " + ", ".join(f"{t:.2f}" for t in results[(c, v)][0])
                     for c in conditions for v in VARIANTS)
    return "\n".join(lines) + f"\n\nEach forward (s): {each}.\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument("--worker", choices=list(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--onnx", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.variant, args.model = args.worker, args.model[0]
        worker(args)
        return
    import onnxruntime
    import torch
    from metrics_speed import write_block

    blocks = []
    for name in args.model:
        text = report(name, measure(name, args.rounds), args.rounds)
        print(text, flush=True)
        blocks.append(text)
    if args.write:
        header = (f"Command: `.venv/bin/python benchmarks/threads_under_load.py --model "
                  f"{' '.join(args.model)} --rounds {args.rounds} --write` "
                  f"({platform.machine()}, 2 shared cores, torch {torch.__version__}, "
                  f"onnxruntime {onnxruntime.__version__}, {time.strftime('%Y-%m-%d %H:%M')}; "
                  f"the machine is shared with other sessions: the load average is given).\n\n")
        write_block("threads_under_load", "### Threads under load: PyTorch and onnxruntime, "
                    "1 and 2 threads, beside a CPU-bound process\n\n" + header
                    + "\n".join(blocks))


if __name__ == "__main__":
    main()
