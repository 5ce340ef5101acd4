"""``sodkit eval`` as a whole command vs a PySODMetrics loop over the same PNG files.

    .venv/bin/python benchmarks/eval_speed.py --pairs 1000 --write

Writes ``--pairs`` realistic 320x320 prediction / GT pairs as PNG to a temporary folder, then
times, each as a fresh process (interpreter start and imports included): ``sodkit eval`` on the
folders, and a script that reads every pair with ``cv2.imread`` and steps PySODMetrics' five
classes (MAE, Smeasure, Emeasure, WeightedFmeasure, Fmeasure). Both results are compared.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2

from sodkit.metrics.testing import realistic_pairs

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metrics_speed import write_block  # noqa: E402

REFERENCE_LOOP = """
import json, sys, warnings
from pathlib import Path
import cv2
import py_sod_metrics as psm
warnings.filterwarnings("ignore")
gt_dir, pred_dir = Path(sys.argv[1]), Path(sys.argv[2])
metrics = [psm.MAE(), psm.Smeasure(), psm.Emeasure(), psm.WeightedFmeasure(), psm.Fmeasure()]
for gt_path in sorted(gt_dir.glob("*.png")):
    gt = cv2.imread(str(gt_path), cv2.IMREAD_GRAYSCALE)
    pred = cv2.imread(str(pred_dir / gt_path.name), cv2.IMREAD_GRAYSCALE)
    if pred.shape != gt.shape:
        pred = cv2.resize(pred, dsize=gt.shape[::-1], interpolation=cv2.INTER_LINEAR)
    for metric in metrics:
        metric.step(pred, gt)
mae, sm, em, wfm, fm = (m.get_results() for m in metrics)
print(json.dumps({"MAE": mae["mae"], "Smeasure": sm["sm"], "wFmeasure": wfm["wfm"],
                  "maxFm": fm["fm"]["curve"].max(), "meanFm": fm["fm"]["curve"].mean(),
                  "adpFm": fm["fm"]["adp"], "maxEm": em["em"]["curve"].max(),
                  "meanEm": em["em"]["curve"].mean(), "adpEm": em["em"]["adp"]}))
"""


def write_pairs(root: Path, count: int) -> None:
    for i, (pred, gt) in enumerate(realistic_pairs(count, 320, 320, seed=1)):
        for folder, image in (("gt", gt), ("pred", pred)):
            (root / folder).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / folder / f"{i:05d}.png"), image)


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_pairs(root, args.pairs)
        sodkit_s, _ = timed([sys.executable, "-m", "sodkit", "eval", "--gt", str(root / "gt"),
                             "--pred", f"m={root / 'pred'}", "--out", str(root / "out")])
        reference_s, out = timed([sys.executable, "-c", REFERENCE_LOOP, str(root / "gt"),
                                  str(root / "pred")])
        ours = json.loads((root / "out" / "results.json").read_text())["m"]
    reference = json.loads(out)
    worst = max(abs(ours[k] - v) for k, v in reference.items())
    text = (f"| command ({args.pairs} PNG pairs, 320x320) | seconds |\n|---|---:|\n"
            f"| `sodkit eval --gt GT --pred m=PRED --out OUT` | {sodkit_s:.1f} |\n"
            f"| PySODMetrics loop (cv2.imread + five classes) | {reference_s:.1f} |\n\n"
            f"sodkit eval is {reference_s / sodkit_s:.1f}x faster as a whole command (process "
            f"start and imports included); largest difference on the nine standard metrics: "
            f"{worst:.1e}.\n")
    print(text)
    if args.write:
        header = (f"### Whole command on PNG files\n\nCommand: `.venv/bin/python "
                  f"benchmarks/eval_speed.py --pairs {args.pairs} --write` "
                  f"({platform.machine()}, 2 shared cores, {time.strftime('%Y-%m-%d')}).\n\n")
        write_block("eval_speed", header + text)


if __name__ == "__main__":
    main()
