"""The checks of ``benchmarks/gpu.sh``: each subcommand prints one markdown row (``| check |
result | figure |``) and exits non-zero when the check fails, so the script stops loudly.

The comparison and bookkeeping subcommands (``compare-weights``, ``compare-eval``,
``check-run``, ``write-results``) run on any machine and are tested on the CPU
(``tests/test_gpu_checks.py``); ``cuda`` needs a GPU.

    python benchmarks/gpu_checks.py cuda
    python benchmarks/gpu_checks.py compare-weights A.pt B.pt --atol 1e-4 --label "DDP x2"
    python benchmarks/gpu_checks.py compare-eval ONE_DIR TWO_DIR --tol 1e-12
    python benchmarks/gpu_checks.py check-run RUN_DIR [--scaler] [--cuda-rng N]
    python benchmarks/gpu_checks.py write-results SUMMARY.md benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

BEGIN, END = "<!-- gpu -->", "<!-- /gpu -->"


class CheckFailed(Exception):
    """A check whose result is wrong: the row is printed with FAIL and the exit code is 1."""


def row(check: str, result: str, figure: str = "") -> str:
    return f"| {check} | {result} | {figure} |"


# ---------------------------------------------------------------------- file comparisons
def max_weight_difference(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Largest absolute difference over the floating-point entries of two state dicts."""
    if a.keys() != b.keys():
        raise CheckFailed(f"different keys: {sorted(a.keys() ^ b.keys())[:5]}")
    worst = 0.0
    for key, value in a.items():
        if value.is_floating_point():
            if not (torch.isfinite(value).all() and torch.isfinite(b[key]).all()):
                raise CheckFailed(f"{key} is not finite")
            worst = max(worst, (value.double() - b[key].double()).abs().max().item())
        elif not torch.equal(value, b[key]):
            raise CheckFailed(f"{key} differs")
    return worst


def compare_weights(a: Path, b: Path, atol: float, label: str) -> str:
    load = [torch.load(p, map_location="cpu", weights_only=True)["model"] for p in (a, b)]
    worst = max_weight_difference(*load)
    if worst > atol:
        raise CheckFailed(row(label, "FAIL", f"max |dw| {worst:.2e} > {atol:g}"))
    return row(label, "ok", f"max |dw| {worst:.2e} (<= {atol:g})")


def _numbers(tree: Any, prefix: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _numbers(value, f"{prefix}{key}/")
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield prefix.rstrip("/"), float(tree)


def compare_eval(one: Path, two: Path, tol: float, label: str) -> str:
    """Two evaluation folders: every metric within ``tol``, every prediction PNG identical."""
    a = dict(_numbers(json.loads((one / "results.json").read_text())))
    b = dict(_numbers(json.loads((two / "results.json").read_text())))
    if not a or a.keys() != b.keys():
        raise CheckFailed(row(label, "FAIL", f"metrics differ in keys ({len(a)} vs {len(b)})"))
    worst = max(abs(a[k] - b[k]) if not (math.isnan(a[k]) and math.isnan(b[k])) else 0.0
                for k in a)
    pngs = sorted(p.relative_to(one) for p in one.rglob("*.png") if "predictions" in p.parts)
    others = sorted(p.relative_to(two) for p in two.rglob("*.png") if "predictions" in p.parts)
    if not pngs or pngs != others:
        raise CheckFailed(row(label, "FAIL", f"prediction files differ ({len(pngs)} vs "
                                             f"{len(others)})"))
    differ = [p for p in pngs if (one / p).read_bytes() != (two / p).read_bytes()]
    figure = f"max metric diff {worst:.1e}, {len(pngs) - len(differ)}/{len(pngs)} PNGs identical"
    if worst > tol or differ:
        raise CheckFailed(row(label, "FAIL", figure))
    return row(label, "ok", figure)


def check_run(run: Path, scaler: bool, cuda_rng: int, label: str) -> str:
    """A finished run: finite weights; with ``scaler`` a saved GradScaler state; with
    ``cuda_rng`` that many ranks' CUDA generator states (each rank its own device's)."""
    state = torch.load(run / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    bad = [k for k, v in state["model"].items() if v.is_floating_point()
           and not torch.isfinite(v).all()]
    if bad:
        raise CheckFailed(row(label, "FAIL", f"non-finite weights: {bad[:3]}"))
    notes = [f"step {state['step']}"]
    if scaler:
        scale = state["scaler"].get("scale")
        if not scale:
            raise CheckFailed(row(label, "FAIL", "no GradScaler state in the checkpoint"))
        notes.append(f"scale {scale:g}")
    if cuda_rng:
        rng = state["rng"]
        have = [r for r in rng if isinstance(r.get("cuda"), torch.Tensor)]
        if len(rng) != cuda_rng or len(have) != cuda_rng:
            raise CheckFailed(row(label, "FAIL", f"CUDA RNG states of {len(have)} of "
                                                 f"{len(rng)} ranks, {cuda_rng} expected"))
        notes.append(f"CUDA RNG of {len(have)} rank(s)")
    return row(label, "ok", ", ".join(notes))


def write_results(summary: Path, results: Path) -> None:
    """Replace the ``<!-- gpu -->`` section of RESULTS.md with ``summary`` (append if none)."""
    section = f"{BEGIN}\n{summary.read_text().rstrip()}\n{END}"
    text = results.read_text() if results.exists() else ""
    if BEGIN in text and END in text:
        start, stop = text.index(BEGIN), text.index(END) + len(END)
        text = text[:start] + section + text[stop:]
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    results.write_text(text)


# ---------------------------------------------------------------------- CUDA-only checks
def cuda_checks() -> list[str]:
    """In-process checks of what only CUDA has (see gpu_cuda.py)."""
    from gpu_cuda import run_all  # beside this file; imports sodkit's CUDA paths

    return run_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("cuda")
    weights = sub.add_parser("compare-weights")
    weights.add_argument("a", type=Path)
    weights.add_argument("b", type=Path)
    weights.add_argument("--atol", type=float, required=True)
    evals = sub.add_parser("compare-eval")
    evals.add_argument("a", type=Path)
    evals.add_argument("b", type=Path)
    evals.add_argument("--tol", type=float, default=1e-12)
    run = sub.add_parser("check-run")
    run.add_argument("run", type=Path)
    run.add_argument("--scaler", action="store_true")
    run.add_argument("--cuda-rng", type=int, default=0)
    for p in (weights, evals, run):
        p.add_argument("--label", default="check")
    write = sub.add_parser("write-results")
    write.add_argument("summary", type=Path)
    write.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    actions: dict[str, Callable[[], Any]] = {
        "cuda": cuda_checks,
        "compare-weights": lambda: compare_weights(args.a, args.b, args.atol, args.label),
        "compare-eval": lambda: compare_eval(args.a, args.b, args.tol, args.label),
        "check-run": lambda: check_run(args.run, args.scaler, args.cuda_rng, args.label),
        "write-results": lambda: write_results(args.summary, args.results),
    }
    try:
        out = actions[args.what]()
    except CheckFailed as exc:
        print(exc, flush=True)
        return 1
    for line in [out] if isinstance(out, str) else out or []:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
