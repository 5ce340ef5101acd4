"""``sodkit eval`` as a whole command vs a PySODMetrics loop, and 1 vs 2 torchrun processes.

    .venv/bin/python benchmarks/eval_speed.py --pairs 1000 --rounds 3 --write

Writes ``--pairs`` realistic 320x320 prediction / GT pairs as PNG to a temporary folder, then,
in each round, times four fresh processes side by side (interpreter start and imports
included): ``sodkit eval`` on the folders; a script that reads every pair with ``cv2.imread``
and steps PySODMetrics' five classes (MAE, Smeasure, Emeasure, WeightedFmeasure, Fmeasure);
``torchrun --nproc_per_node=1`` and ``=2`` running the same ``sodkit eval``. The cores are
shared with other work, so absolute times move between rounds: the figures are medians of the
per-round times and of the per-round ratios. Every run's results are compared with the first
(exactly) and with PySODMetrics.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import re
import resource
import shutil
import statistics
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
COMPARED = ("results.json", "results_per_image.csv", "curves.json")
MEASURED = re.compile(r"images measured.* in ([0-9.]+) s")
RUNS = ("ours", "reference", "torchrun1", "torchrun2")


def write_pairs(root: Path, count: int) -> None:
    for i, (pred, gt) in enumerate(realistic_pairs(count, 320, 320, seed=1)):
        for folder, image in (("gt", gt), ("pred", pred)):
            (root / folder).mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(root / folder / f"{i:05d}.png"), image)


def adopt_orphans() -> None:
    """Become the parent of orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    ``sodkit eval``'s fork server outlives it by a moment and is waited for by no one, so
    without this its CPU time and its workers' would be missing from the CPU column."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap_orphans() -> None:
    """Wait for every adopted descendant, so that its CPU time enters RUSAGE_CHILDREN."""
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)


def timed(command: list[str]) -> dict:
    """Wall and CPU seconds (user + system, every descendant included) of one fresh process.
    The wall time ends when the command exits; CPU is read once its descendants are gone."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = MEASURED.search(done.stderr)
    return {"wall": wall, "cpu": cpu, "stdout": done.stdout,
            "measure": float(found.group(1)) if found else None}


def commands(root: Path, out: Path) -> dict[str, list[str]]:
    eval_args = ["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'pred'}"]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    return {
        "ours": [sys.executable, "-m", "sodkit", *eval_args, "--out", str(out / "ours")],
        "reference": [sys.executable, "-c", REFERENCE_LOOP, str(root / "gt"), str(root / "pred")],
        "torchrun1": [*torchrun, "--nproc_per_node=1", "-m", "sodkit", *eval_args,
                      "--out", str(out / "torchrun1")],
        "torchrun2": [*torchrun, "--nproc_per_node=2", "-m", "sodkit", *eval_args,
                      "--out", str(out / "torchrun2")],
    }


def one_round(root: Path) -> tuple[dict[str, dict], dict[str, bool], float]:
    """Every run once; whether each eval's files equal the single process's, and the largest
    difference to PySODMetrics on the nine standard metrics."""
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    times = {name: timed(command) for name, command in commands(root, out).items()}
    same = {name: all((out / name / f).read_bytes() == (out / "ours" / f).read_bytes()
                      for f in COMPARED) for name in ("torchrun1", "torchrun2")}
    ours = json.loads((out / "ours" / "results.json").read_text())["m"]
    reference = json.loads(times["reference"]["stdout"])
    return times, same, max(abs(ours[k] - v) for k, v in reference.items())


def report(rounds: list[tuple[dict[str, dict], dict[str, bool], float]], pairs: int) -> str:
    def median(name: str, key: str) -> float:
        return statistics.median(r[0][name][key] for r in rounds)

    def ratio(a: str, b: str, key: str = "wall") -> float:
        return statistics.median(r[0][a][key] / r[0][b][key] for r in rounds)

    labels = {"ours": "`sodkit eval --gt GT --pred m=PRED --out OUT`",
              "reference": "PySODMetrics loop (cv2.imread + five classes)",
              "torchrun1": "`torchrun --nproc_per_node=1 -m sodkit eval ...`",
              "torchrun2": "`torchrun --nproc_per_node=2 -m sodkit eval ...`"}
    lines = [f"| command ({pairs} PNG pairs, 320x320; median of {len(rounds)} rounds) | wall s "
             f"| CPU s | measuring s |", "|---|---:|---:|---:|"]
    for name in RUNS:
        measured = [r[0][name]["measure"] for r in rounds]
        shown = f"{statistics.median(measured):.2f}" if None not in measured else ""
        lines.append(f"| {labels[name]} | {median(name, 'wall'):.2f} | "
                     f"{median(name, 'cpu'):.2f} | {shown} |")
    exact = all(all(r[1].values()) for r in rounds)
    worst = max(r[2] for r in rounds)
    return "\n".join(lines) + (
        f"\n\nsodkit eval is **{ratio('reference', 'ours'):.1f}x** faster than the PySODMetrics "
        f"loop as a whole command (median of per-round wall-time ratios; CPU time "
        f"{ratio('reference', 'ours', 'cpu'):.1f}x); largest difference on the nine standard "
        f"metrics: {worst:.1e}. torchrun with 2 processes against 1: whole command "
        f"{ratio('torchrun2', 'torchrun1'):.2f}x the wall time, measuring phase (rank 0's log: "
        f"its shard, the agreement and the gather) "
        f"{_measure_ratio(rounds):.2f}x. results.json, results_per_image.csv and curves.json of "
        f"both torchrun runs equal the single process's byte for byte in every round: {exact}.\n")


def _measure_ratio(rounds: list) -> float:
    return statistics.median(r[0]["torchrun2"]["measure"] / r[0]["torchrun1"]["measure"]
                             for r in rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    adopt_orphans()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_pairs(root, args.pairs)
        rounds = []
        for i in range(args.rounds):
            rounds.append(one_round(root))
            print(f"round {i + 1}: " + ", ".join(
                f"{name} {t['wall']:.2f} s" for name, t in rounds[-1][0].items()), flush=True)
    text = report(rounds, args.pairs)
    print(text)
    if args.write:
        header = (f"### Whole command on PNG files\n\nCommand: `.venv/bin/python "
                  f"benchmarks/eval_speed.py --pairs {args.pairs} --rounds {args.rounds} "
                  f"--write` ({platform.machine()}, {os.cpu_count()} cores shared with other "
                  f"work, {time.strftime('%Y-%m-%d')}). Wall and CPU time of each fresh "
                  f"process (start and imports included); \"measuring\" is the time sodkit "
                  f"logs for reading and measuring the images and gathering them to rank 0.\n\n")
        write_block("eval_speed", header + text)


if __name__ == "__main__":
    main()
