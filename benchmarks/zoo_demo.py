"""Acceptance of the model zoo: every network x backbone trained on the demo recipe.

    .venv/bin/python benchmarks/zoo_demo.py [--nets fpn minet f3net] [--backbones resnet18 resnet50]
        [--out /tmp/zoo_runs] [--jsonl FILE]

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
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEST_CONSTANT_MAE = 0.1644  # benchmarks/RESULTS.md, demo_baselines


def run_one(net: str, backbone: str, out: Path) -> dict:
    """Train one pair; return its row."""
    from sodkit.config import load_config
    from sodkit.engine.info import describe

    name = f"zoo_{net}_{backbone}"
    overrides = [f"model.name={net}", f"model.backbone={backbone}", f"name={name}",
                 f"output_root={out}", "train.image_every=0"]
    start = time.time()
    subprocess.run([sys.executable, "-m", "sodkit", "train", "configs/demo.yaml", *overrides,
                    "--overwrite"], cwd=ROOT, check=True, capture_output=True)
    wall = time.time() - start
    run = out / name
    results = json.loads((run / "results.json").read_text())
    test = next(iter(results.values()))
    rates = re.findall(r"([\d.]+) img/s", (run / "train.log").read_text())
    info = describe(load_config(ROOT / "configs" / "demo.yaml", overrides))
    return {"network": net, "backbone": backbone, "MAE": test["MAE"], "maxFm": test["maxFm"],
            "S": test["Smeasure"], "params_M": info["parameters"]["total"] / 1e6,
            "GFLOPs": info["flops"] / 1e9, "train_img_s": float(rates[-1]) if rates else None,
            "wall_s": round(wall, 1), "passes": test["MAE"] <= 0.5 * BEST_CONSTANT_MAE}


def table(rows: list[dict]) -> str:
    lines = ["| network | backbone | MAE | max-F | S | params (M) | GFLOPs (160 px) | "
             "train img/s | wall (s) | MAE <= 0.082 |", "|---|---|---|---|---|---|---|---|---|---|"]
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
    args = parser.parse_args()
    args.jsonl.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for backbone in args.backbones:
        for net in args.nets:
            row = run_one(net, backbone, args.out)
            rows.append(row)
            with args.jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
