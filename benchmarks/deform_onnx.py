"""BiRefNet's deformable ASPP in onnxruntime: ONNX's ``DeformConv`` node against its exact
decomposition (``grid_sample`` + matmul), at the recipe's feature-map sizes (issue 35, item 1).

    .venv/bin/python benchmarks/deform_onnx.py --sizes 32 64 128 256 --threads 1 2 --rounds 5 \\
        [--write]

BiRefNet at 1024 px has an ``ASPPDeformable`` on 64 channels in each decoder level (maps of 256,
128, 64 and 32 px: strides 4-32) and one more in its squeeze block (32 px); each holds four
deformable convolutions, 64 -> 256 channels, kernels 1, 1, 3 and 7. One such module, its
offset and modulation convolutions given random weights (so that samples move off the grid and
some fall outside the map), is exported once per form (``DeformConv``: opset 19; the
decomposition: opset 17, sodkit's default) and run by onnxruntime at each size, batch 1, with
``--threads`` intra-op threads; the forms alternate within a round (odd rounds start with the
node, even rounds with the decomposition). Figures: the median over rounds of the median of 3
runs; the machine is shared, so the load average before and after the run is printed.
PyTorch's own operator (torchvision, same threads) is timed once per size, for scale.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from metrics_speed import write_block  # noqa: E402

from sodkit.module.aspp import ASPPDeformable, DeformConv2d  # noqa: E402
from sodkit.module.deform_export import deform_export_form  # noqa: E402

FORMS = {"DeformConv": 19, "decomposed": 17}


def aspp() -> ASPPDeformable:
    torch.manual_seed(0)
    module = ASPPDeformable(64).eval()
    for m in module.modules():
        if isinstance(m, DeformConv2d):
            torch.nn.init.normal_(m.offset.weight, std=0.05)
            torch.nn.init.normal_(m.modulator.weight, std=0.05)
    return module


def export(module: ASPPDeformable, folder: Path) -> dict[str, Path]:
    paths = {}
    axes = {0: "batch", 2: "height", 3: "width"}
    for form, opset in FORMS.items():
        paths[form] = folder / f"{form}.onnx"
        with deform_export_form(module, form), warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, (torch.randn(1, 64, 32, 32),), str(paths[form]),
                              dynamo=False, opset_version=opset, input_names=["x"],
                              output_names=["y"], dynamic_axes={"x": axes, "y": axes})
    return paths


def time_runs(run, repeats: int = 3) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(sizes: list[int], threads: list[int], rounds: int) -> dict:
    import onnxruntime as ort

    module = aspp()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = export(module, Path(tmp))
        for n in threads:
            torch.set_num_threads(n)
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = n, 1
            sessions = {f: ort.InferenceSession(str(p), options, providers=[
                "CPUExecutionProvider"]) for f, p in paths.items()}
            for size in sizes:
                x = np.random.default_rng(size).standard_normal((1, 64, size, size),
                                                                dtype=np.float32)
                with torch.no_grad():
                    expected = module(torch.from_numpy(x)).numpy()
                diffs = {f: float(np.abs(s.run(None, {"x": x})[0] - expected).max())
                         for f, s in sessions.items()}
                order = list(sessions)
                per_round: dict[str, list[float]] = {f: [] for f in [*order, "torch"]}
                for r in range(rounds):
                    for form in (order if r % 2 == 0 else order[::-1]):
                        per_round[form].append(time_runs(
                            lambda s=sessions[form], x=x: s.run(None, {"x": x})))
                with torch.no_grad():
                    per_round["torch"].append(time_runs(
                        lambda x=x: module(torch.from_numpy(x))))
                results[(n, size)] = ({k: statistics.median(v) for k, v in per_round.items()},
                                      diffs)
                print(n, size, results[(n, size)], flush=True)
    return results


# run in a fresh process that imports onnxruntime and numpy only (torch would add its own)
PEAK = """
import sys, numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
size = int(sys.argv[2])
session.run(None, {"x": np.random.default_rng(0).standard_normal((1, 64, size, size),
                                                                 dtype=np.float32)})
# VmHWM: this process's own peak (ru_maxrss keeps the parent's across exec)
status = open("/proc/self/status").read().split("VmHWM:")[1]
print(int(status.split()[0]) / 1024)
"""


def peak_rss_mib(path: Path, size: int) -> float:
    """The peak resident set of a fresh process that runs ``path`` once at ``size``."""
    out = subprocess.run([sys.executable, "-c", PEAK, str(path), str(size)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def memory(size: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = export(aspp(), Path(tmp))
        return {form: peak_rss_mib(path, size) for form, path in paths.items()}


def report(results: dict, rounds: int) -> str:
    lines = ["| threads | map | `DeformConv` node (opset 19) | decomposition (opset 17) | "
             "node / decomposition | PyTorch (torchvision) | largest diff (node, decomp.) |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for (n, size), (times, diffs) in sorted(results.items()):
        lines.append(f"| {n} | {size}x{size} | {times['DeformConv'] * 1e3:.1f} ms | "
                     f"{times['decomposed'] * 1e3:.1f} ms | "
                     f"{times['DeformConv'] / times['decomposed']:.2f}x | "
                     f"{times['torch'] * 1e3:.1f} ms | "
                     f"{diffs['DeformConv']:.1e}, {diffs['decomposed']:.1e} |")
    return "\n".join(lines) + f"\n\nMedians of {rounds} rounds (each the median of 3 runs)."


def report_memory(peaks: dict[str, float], size: int) -> str:
    return (f"Peak resident memory of a process that runs the module once at {size}x{size} "
            f"(session, model and input included): `DeformConv` node "
            f"{peaks['DeformConv']:.0f} MiB, decomposition {peaks['decomposed']:.0f} MiB.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    import onnxruntime

    load = os.getloadavg()[0]
    table = report(measure(args.sizes, args.threads, args.rounds), args.rounds)
    table += "\n\n" + report_memory(memory(max(args.sizes)), max(args.sizes)) + "\n"
    print(table)
    if args.write:
        header = (f"Command: `.venv/bin/python benchmarks/deform_onnx.py --sizes "
                  f"{' '.join(map(str, args.sizes))} --threads "
                  f"{' '.join(map(str, args.threads))} --rounds {args.rounds} --write` "
                  f"({platform.machine()}, 2 shared cores, torch {torch.__version__}, "
                  f"onnxruntime {onnxruntime.__version__}, {time.strftime('%Y-%m-%d %H:%M')}, "
                  f"load average {load:.1f} before the run, {os.getloadavg()[0]:.1f} after).\n\n"
                  "One `ASPPDeformable` (64 channels, four deformable convolutions 64 -> 256, "
                  "kernels 1, 1, 3, 7), batch 1:\n\n")
        write_block("deform_onnx", "### BiRefNet's deformable ASPP in onnxruntime: "
                    "`DeformConv` node vs decomposition\n\n" + header + table)


if __name__ == "__main__":
    main()
