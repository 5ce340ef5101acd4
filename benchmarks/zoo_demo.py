"""Acceptance of the model zoo: every network x backbone trained on the demo recipe.

    .venv/bin/python benchmarks/zoo_demo.py [--nets fpn minet f3net] [--backbones resnet18 resnet50]
        [--out /tmp/zoo_runs] [--jsonl FILE] [--read-only]

Each pair runs ``sodkit train configs/demo.yaml model.name=X model.backbone=Y`` in a fresh
process, one after another (a shared CPU makes concurrent throughput meaningless), then reads the
test results, the last logged training throughput and ``sodkit info``'s parameters and FLOPs.
One JSON line per finished run goes to ``--jsonl`` (so an interrupted sweep keeps its rows), and
a Markdown table is printed at the end. The bar: MAE <= 0.5 x the best constant's (0.1644).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEST_CONSTANT_MAE = 0.1644  # benchmarks/RESULTS.md, demo_baselines


def overrides_of(net: str, backbone: str, out: Path) -> list[str]:
    return [f"model.name={net}", f"model.backbone={backbone}", f"name=zoo_{net}_{backbone}",
            f"output_root={out}", "train.image_every=0"]


def train_one(net: str, backbone: str, out: Path) -> float:
    """Train one pair in a fresh process; returns the wall-clock seconds."""
    start = time.time()
    subprocess.run([sys.executable, "-m", "sodkit", "train", "configs/demo.yaml",
                    *overrides_of(net, backbone, out), "--overwrite"],
                   cwd=ROOT, check=True, capture_output=True)
    return time.time() - start


def read_row(net: str, backbone: str, out: Path, wall: float | None) -> dict:
    """A finished run's row. Throughput: the median of the logged windows (a single window can
    catch another process's burst on a shared CPU)."""
    from sodkit.config import load_config
    from sodkit.engine.info import describe

    overrides = overrides_of(net, backbone, out)
    run = out / f"zoo_{net}_{backbone}"
    test = next(iter(json.loads((run / "results.json").read_text()).values()))
    rates = [float(r) for r in re.findall(r"([\d.]+) img/s", (run / "train.log").read_text())]
    info = describe(load_config(ROOT / "configs" / "demo.yaml", overrides))
    return {"network": net, "backbone": backbone, "MAE": test["MAE"], "maxFm": test["maxFm"],
            "S": test["Smeasure"], "params_M": info["parameters"]["total"] / 1e6,
            "GFLOPs": info["flops"] / 1e9,
            "train_img_s": round(statistics.median(rates), 1) if rates else None,
            "wall_s": None if wall is None else round(wall, 1),
            "passes": test["MAE"] <= 0.5 * BEST_CONSTANT_MAE}


def table(rows: list[dict]) -> str:
    lines = ["| network | backbone | MAE | max-F | S | params (M) | GFLOPs (160 px) | "
             "train img/s (median) | wall (s) | MAE <= 0.082 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['network']} | {r['backbone']} | {r['MAE']:.4f} | {r['maxFm']:.4f} | "
                     f"{r['S']:.4f} | {r['params_M']:.2f} | {r['GFLOPs']:.2f} | "
                     f"{r['train_img_s']} | {r['wall_s']} | {'yes' if r['passes'] else 'NO'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", nargs="+", default=["fpn", "minet", "f3net"])
    parser.add_argument("--backbones", nargs="+", default=["resnet18", "resnet50"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/zoo_runs"))
    parser.add_argument("--jsonl", type=Path, default=Path("/tmp/zoo_runs/rows.jsonl"))
    parser.add_argument("--read-only", action="store_true",
                        help="train nothing: rows from the finished runs under --out")
    args = parser.parse_args()
    args.jsonl.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for backbone in args.backbones:
        for net in args.nets:
            wall = None if args.read_only else train_one(net, backbone, args.out)
            row = read_row(net, backbone, args.out, wall)
            rows.append(row)
            with args.jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
