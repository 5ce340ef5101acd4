"""BiRefNet's training-step memory per input size and batch size, plain / checkpointing / bf16 /
both, and whether a size fits a 24 GB GPU (issue 24, item 5; BiRefNet's issues #188, #217).

    python benchmarks/birefnet_memory.py [CONFIG] --run 1024:2 --run 1024:4 --run 2048:2 \\
        [--backbone swin_large_patch4_window12_384] [--json OUT.json] [key=value ...]

Each (size, batch, variant) is one fresh process, ``python -m sodkit.engine.bench`` (the
trainer's own step on an in-memory batch, one warm-up step, then one measured step), as
``sodkit bench memory`` runs its variants. A variant that runs out of memory is a row saying
so, not a failure. ``fits 24 GB``: the step's total peak (CUDA ``max_memory_allocated``:
weights, gradients, AdamW state and activations) plus 1.5 GiB for the CUDA context and the
caching allocator's slack is at most 24 GiB. BatchNorm on the ASPP's image-pooled branch needs
two images a batch in training, so batches start at 2. On the CPU (a dry run at a tiny size)
the same table comes out, with the resident-set peak.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"plain": ("off", "fp32"), "checkpointing": ("all", "fp32"),
            "bf16": ("off", "bf16"), "bf16+checkpointing": ("all", "bf16")}
GIB = 1024
BUDGET_MIB, SLACK_MIB = 24 * GIB, 1.5 * GIB


def measure(config: str, overrides: list[str], size: int, batch: int, variant: str) -> dict:
    """One variant in a fresh process; ``{"error": ...}`` where it fails (out of memory)."""
    checkpointing, precision = VARIANTS[variant]
    cmd = [sys.executable, "-m", "sodkit.engine.bench", config, *overrides,
           f"data.size={size}", f"data.batch_size={batch}",
           f"model.checkpointing={checkpointing}", f"runtime.precision={precision}",
           "--steps", "1"]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=ROOT)
    row = {"size": size, "batch": batch, "variant": variant}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        oom = "out of memory" in done.stderr.lower()
        return {**row, "error": "out of memory" if oom else tail[0][:200]}
    return {**row, **json.loads(done.stdout.strip().splitlines()[-1])}


def fits(row: dict) -> str:
    if "error" in row:
        return "no (out of memory)" if row["error"] == "out of memory" else "failed"
    return "yes" if row["peak_total_mb"] + SLACK_MIB <= BUDGET_MIB else "no"


def table(rows: list[dict]) -> str:
    lines = ["| size | batch | variant | step adds (MB) | total peak (MB) | step (s) "
             "| fits 24 GB |", "|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['size']} | {r['batch']} | {r['variant']} | - | - | - | "
                         f"{fits(r)}: {r['error']} |")
        else:
            lines.append(f"| {r['size']} | {r['batch']} | {r['variant']} | {r['peak_mb']:.0f} | "
                         f"{r['peak_total_mb']:.0f} | {r['step_s']:.2f} | {fits(r)} |")
    return "\n".join(lines)


def verdicts(rows: list[dict]) -> list[str]:
    """One line per size: the variants and batches that fit 24 GB, or that none does."""
    out = []
    for size in sorted({r["size"] for r in rows}):
        ok = [f"{r['variant']} at batch {r['batch']}" for r in rows
              if r["size"] == size and fits(r) == "yes"]
        out.append(f"{size} px in 24 GB: " + (f"yes, {', '.join(ok)}" if ok else "no"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default="configs/demo.yaml")
    parser.add_argument("overrides", nargs="*", help="config key=value")
    parser.add_argument("--run", action="append", default=[], metavar="SIZE:BATCH")
    parser.add_argument("--backbone", default="swin_large_patch4_window12_384")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_intermixed_args(argv)
    overrides = ["model.name=birefnet", f"model.backbone={args.backbone}",
                 "model.pretrained=null", *args.overrides]
    rows = []
    for run in args.run or ["1024:2"]:
        size, batch = (int(v) for v in run.split(":"))
        for variant in args.variants.split(","):
            rows.append(measure(args.config, overrides, size, batch, variant))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    print(table(rows))
    print()
    print("\n".join(verdicts(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all("error" not in r or r["error"] == "out of memory" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
