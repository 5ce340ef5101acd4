"""One forward pass per runtime and precision on this CPU (issue 35): PyTorch fp32, PyTorch bf16
autocast, onnxruntime fp32 and onnxruntime int8 (dynamic quantization; static where quick), at
1 and 2 threads, for the demo FPN, MINet-R50 at 320 px and BiRefNet Swin-T at 1024 px.

    .venv/bin/python benchmarks/cpu_runtimes.py --model demo-fpn minet-r50 --rounds 5 [--write]
    .venv/bin/python benchmarks/cpu_runtimes.py --model birefnet-swint --rounds 2 [--write]

Each network is built from its recipe with random weights (``model.pretrained=null``: speed does
not depend on them) and exported by sodkit's own export (opset 17, fixed size, batch 1; for
BiRefNet also opset 19, whose graph holds ONNX's ``DeformConv`` node instead of the
decomposition). int8: ``onnxruntime.quantization.quantize_dynamic`` (weights int8, activations
quantized per run) on the pre-processed graph, and ``quantize_static`` (QDQ, per-channel
int8 weights, uint8 activations, calibrated on 4 rendered photos) where ``--static`` names the
model. The input is one rendered photo (the demo's renderer) resized to the recipe's size.

A round times one forward of every (variant, threads), batch 1, after one warm-up forward of
each (the first call allocates and plans); a forward under 0.5 s is timed as the mean of up to
20 in a row. Odd rounds run the thread counts and the variants in reverse order, so none always
runs in another's wake (torch's thread count changes between thread counts only). The figure
is the median over rounds; the load average (1 min) is read before every timed forward, and
the machine is shared with other sessions, so the table gives its range. ``max |diff|`` is the
largest difference of the probabilities from PyTorch fp32 on this input: a check that each
variant computes the same network, not an accuracy figure (random weights; the accuracy on
photographs is a later item's measurement).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_models import MODELS  # noqa: E402
from metrics_speed import write_block  # noqa: E402

from sodkit.config import load_config  # noqa: E402
from sodkit.data.render import render_sample  # noqa: E402
from sodkit.engine.export import SaliencyModel, export_onnx  # noqa: E402
from sodkit.inference.pipelines import build_test_transform  # noqa: E402
from sodkit.network import build_network  # noqa: E402


def photos(transform, count: int, seed: int = 0) -> list[np.ndarray]:
    """``count`` rendered photos through the recipe's inference transform, (1, 3, S, S)."""
    rng = np.random.default_rng(seed)
    return [transform(render_sample(rng, 320, 640)[0])[None].numpy() for _ in range(count)]


def build(name: str, tmp: Path, static: bool, dynamic_ops: list[str] | None
          ) -> tuple[dict, np.ndarray, int]:
    """The variants of one network: name -> (make(threads) -> run(x) -> probabilities)."""
    recipe, overrides, _ = MODELS[name]
    cfg = load_config(ROOT / recipe, overrides)
    torch.manual_seed(0)
    net = build_network(replace(cfg.model, pretrained=None), aux_outputs=False).eval()
    model = SaliencyModel(net).eval()
    x = photos(build_test_transform(cfg.data), 1)[0]
    size = (cfg.data.size, cfg.data.size)
    onnx = {"onnxruntime fp32": tmp / "fp32.onnx"}
    export_onnx(model, onnx["onnxruntime fp32"], size, 17, dynamic=False)
    if name.startswith("birefnet"):
        onnx["onnxruntime fp32, DeformConv node (opset 19)"] = tmp / "fp32_19.onnx"
        export_onnx(model, onnx["onnxruntime fp32, DeformConv node (opset 19)"], size, 19, False)
    onnx.update(quantized(onnx["onnxruntime fp32"], tmp, cfg, static, dynamic_ops))
    variants = {"PyTorch fp32": torch_variant(model, bf16=False),
                "PyTorch bf16 autocast": torch_variant(model, bf16=True)}
    variants.update({label: ort_variant(path) for label, path in onnx.items()})
    return variants, x, sum(p.numel() for p in net.parameters())


def quantized(fp32: Path, tmp: Path, cfg, static: bool, dynamic_ops: list[str] | None
              ) -> dict[str, Path]:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    logging.getLogger().setLevel(logging.ERROR)  # a warning per 1-d weight it leaves alone
    prepared = tmp / "prepared.onnx"
    here = Path.cwd()
    os.chdir(tmp)  # its shape inference leaves temporary files in the working folder
    try:
        quant_pre_process(str(fp32), str(prepared))
    except Exception:  # BiRefNet: "Incomplete symbolic shape inference"; ONNX's own then
        quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=True)
    finally:
        os.chdir(here)
    label = "onnxruntime int8 dynamic" + (f" ({', '.join(dynamic_ops)} only)"
                                          if dynamic_ops else "")
    out = {label: tmp / "int8_dynamic.onnx"}
    quantize_dynamic(str(prepared), str(out[label]), weight_type=QuantType.QInt8,
                     op_types_to_quantize=dynamic_ops)
    if static:
        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                self.items = iter(photos(build_test_transform(cfg.data), 4, seed=1))

            def get_next(self):
                item = next(self.items, None)
                return None if item is None else {"image": item}

        out["onnxruntime int8 static (QDQ)"] = tmp / "int8_static.onnx"
        quantize_static(str(prepared), str(out["onnxruntime int8 static (QDQ)"]), Reader(),
                        quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


def torch_variant(model: torch.nn.Module, bf16: bool):
    """make(threads, fresh) -> start() -> run(x); PyTorch keeps one model whatever ``fresh``."""
    def make(threads: int, fresh: bool):
        def run(x: np.ndarray) -> np.ndarray:
            torch.set_num_threads(threads)
            with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
                return model(torch.from_numpy(x)).float().numpy()
        return lambda: run
    return make


def ort_variant(path: Path):
    """make(threads, fresh) -> start() -> run(x); ``fresh``: a new session per start (its
    memory arena goes with it: BiRefNet's sessions keep gigabytes each after a run)."""
    def make(threads: int, fresh: bool):
        import onnxruntime as ort

        def start():
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            session = ort.InferenceSession(str(path), options,
                                           providers=["CPUExecutionProvider"])
            return lambda x: session.run(None, {"image": x})[0]
        if fresh:
            return start
        run = start()
        return lambda: run
    return make


def measure(name: str, threads: list[int], rounds: int, static: bool,
            dynamic_ops: list[str] | None, warmup: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        variants, x, params = build(name, Path(tmp), static, dynamic_ops)
        starts = {(v, n): make(n, not warmup) for v, make in variants.items() for n in threads}
        reference = starts[("PyTorch fp32", threads[0])]()(x)
        diffs = {v: float(np.abs(starts[(v, threads[0])]()(x) - reference).max())
                 for v in variants}
        reps = dict.fromkeys(starts, 1)
        for key, start_run in starts.items() if warmup else ():  # a fast one: several in a row
            run = start_run()
            start = time.perf_counter()
            run(x)
            reps[key] = max(1, min(20, int(0.5 / (time.perf_counter() - start))))
        times: dict = {key: [] for key in starts}
        loads = []
        for r in range(rounds):
            for n in (threads if r % 2 == 0 else threads[::-1]):
                for v in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
                    run = starts[(v, n)]()  # a fresh session is made before the clock
                    loads.append(os.getloadavg()[0])
                    start = time.perf_counter()
                    for _ in range(reps[(v, n)]):
                        run(x)
                    times[(v, n)].append((time.perf_counter() - start) / reps[(v, n)])
                    del run
                    print(name, r, v, n, f"{times[(v, n)][-1]:.3f} s", f"load {loads[-1]:.1f}",
                          flush=True)
    return {"times": times, "diffs": diffs, "loads": loads, "params": params,
            "variants": list(variants), "threads": threads, "rounds": rounds, "warmup": warmup}


def report(name: str, m: dict) -> str:
    n1, *rest = m["threads"]
    head = " | ".join(f"{n} thread{'s' if n > 1 else ''}" for n in m["threads"])
    warm = "" if m["warmup"] else (
        " (no warm-up: each onnxruntime forward is a new session's first run, the session "
        "made before the clock; PyTorch's model ran once before, for max |diff|)")
    lines = [f"#### {MODELS[name][2]}: {m['params'] / 1e6:.1f}M parameters, batch 1, median "
             f"of {m['rounds']} rounds{warm}, load average {min(m['loads']):.1f}-"
             f"{max(m['loads']):.1f}", "",
             f"| variant | {head} | vs PyTorch fp32 ({n1} thread) | max \\|diff\\| |",
             "|---|" + "---:|" * (len(m["threads"]) + 2)]
    base = statistics.median(m["times"][("PyTorch fp32", n1)])
    for v in m["variants"]:
        cells = [f"{statistics.median(m['times'][(v, n)]):.3f} s" for n in m["threads"]]
        speed = base / statistics.median(m["times"][(v, n1)])
        lines.append(f"| {v} | {' | '.join(cells)} | {speed:.2f}x | {m['diffs'][v]:.1e} |")
    rounds = "; ".join(
        f"{v} {n}: " + ", ".join(f"{t:.2f}" for t in m["times"][(v, n)])
        for v in m["variants"] for n in m["threads"])
    return "\n".join(lines) + f"\n\nEach round (s): {rounds}.\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--static", nargs="*", default=["demo-fpn", "minet-r50"],
                        help="models that also get static int8 quantization")
    parser.add_argument("--dynamic-ops", nargs="+",
                        help="the op types int8 dynamic quantization takes (default: all it can)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="time first runs of new sessions (for forwards of minutes, whose "
                             "sessions would keep their memory)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    import onnxruntime

    blocks = []
    for name in args.model:
        text = report(name, measure(name, args.threads, args.rounds, name in args.static,
                                    args.dynamic_ops, not args.no_warmup))
        print(text, flush=True)
        blocks.append(text)
    if args.write:
        tag = "cpu_runtimes_" + "_".join(m.replace("-", "_") for m in args.model)
        header = (f"Command: `.venv/bin/python benchmarks/cpu_runtimes.py --model "
                  f"{' '.join(args.model)} --threads {' '.join(map(str, args.threads))} "
                  f"--rounds {args.rounds}"
                  + (f" --dynamic-ops {' '.join(args.dynamic_ops)}" if args.dynamic_ops else "")
                  + (" --no-warmup" if args.no_warmup else "")
                  + f" --write` ({platform.machine()}, 2 shared cores with "
                  f"AVX-512-BF16 and AMX, torch {torch.__version__}, onnxruntime "
                  f"{onnxruntime.__version__}, {time.strftime('%Y-%m-%d %H:%M')}).\n\n")
        title = "### One forward per runtime and precision: " + ", ".join(
            MODELS[m][2] for m in args.model)
        write_block(tag, f"{title}\n\n{header}" + "\n".join(blocks))


if __name__ == "__main__":
    main()
