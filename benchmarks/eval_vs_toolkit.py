"""``sodkit eval`` against PySODEvalToolkit's own ``eval.py``, side by side on the same files.

    .venv/bin/python benchmarks/eval_vs_toolkit.py --pairs 1050 --rounds 3 --write
    .venv/bin/python benchmarks/eval_vs_toolkit.py --toolkit-source /path/to/PySODEvalToolkit

Writes two datasets x three methods of realistic PNG pairs (as the cross-check of #25: mixed
GT sizes, a method named ``<stem>_sal.png``, a method at half the GT's resolution), then, in
alternating rounds, times two fresh processes on them (interpreter start and imports included,
every descendant's CPU time counted):

- ``sodkit eval`` with its defaults (one worker process per core, tables, curves, plots);
- PySODEvalToolkit's ``eval.py`` at its best setting: one thread per (dataset, method) job
  (``--num-workers 6``), the metrics both compute (``sm wfm mae fmeasure em precision recall
  iou dice specificity``; sodkit computes BER, Kappa and accuracy as well).

The toolkit is cloned from its published source (``--toolkit-source``: its GitHub URL by
default, or a local clone / mirror) into a temporary folder, and what it imports that this
environment lacks (``tabulate``) is installed next to it with ``pip --target``. Where it cannot
be had (no network), a faithful stand-in runs instead: the toolkit's loop (its reading with
``cv2.imread`` and bilinear resize, a ``ThreadPool`` over the jobs, the same PySODMetrics
classes and handlers), and the table says which one ran. Every round's numbers are compared
with sodkit's. The last rows are each command's fixed cost: the same command on 6 pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from sodkit.metrics.testing import realistic_pair

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_speed import adopt_orphans, timed  # noqa: E402
from metrics_speed import write_block  # noqa: E402

TOOLKIT_URL = "https://github.com/lartpang/PySODEvalToolkit"
DATASETS = {"D1": (320, 320), "D2": (288, 384)}  # every other GT of a dataset is transposed
METHODS = {"A": "", "B": "_sal", "C": ""}  # method -> file suffix; C is at half resolution
TOOLKIT_METRICS = ("sm", "wfm", "mae", "fmeasure", "em", "precision", "recall", "iou", "dice",
                   "specificity")
# the toolkit's result names -> sodkit's keys
NAMES = {"sm": "Smeasure", "wfm": "wFmeasure", "mae": "MAE", "maxem": "maxEm",
         "avgem": "meanEm", "adpem": "adpEm"} | {
    f"{mode}{name}": f"{ours_mode}{key}" for name, key in
    (("fmeasure", "Fm"), ("precision", "Precision"), ("recall", "Recall"), ("iou", "IoU"),
     ("dice", "Dice"), ("specificity", "Specificity"))
    for mode, ours_mode in (("max", "max"), ("avg", "mean"), ("adp", "adp"))}

STAND_IN = """
import json, sys, warnings
from multiprocessing import pool
from pathlib import Path
import cv2, numpy as np
import py_sod_metrics as psm
warnings.filterwarnings("ignore")
jobs, workers = json.loads(Path(sys.argv[1]).read_text()), int(sys.argv[2])
kw = dict(with_dynamic=True, with_adaptive=True, with_binary=False, sample_based=True)
handlers = {"fmeasure": (psm.FmeasureHandler, dict(kw, beta=0.3)),
            "precision": (psm.PrecisionHandler, kw), "recall": (psm.RecallHandler, kw),
            "iou": (psm.IOUHandler, kw), "dice": (psm.DICEHandler, kw),
            "specificity": (psm.SpecificityHandler, kw)}
def evaluate(job):
    mae, sm, em, wfm, fmv2 = psm.MAE(), psm.Smeasure(), psm.Emeasure(), psm.WeightedFmeasure(), \\
        psm.FmeasureV2()
    for name, (handler, kwargs) in handlers.items():
        fmv2.add_handler(handler_name=name, metric_handler=handler(**kwargs))
    for gt_path, pred_path in job["pairs"]:
        pred = cv2.imread(pred_path, cv2.IMREAD_GRAYSCALE)
        gt = cv2.imread(gt_path, cv2.IMREAD_GRAYSCALE)
        if pred.shape != gt.shape:
            pred = cv2.resize(pred, dsize=gt.shape[::-1], interpolation=cv2.INTER_LINEAR)
        for metric in (mae, sm, em, wfm, fmv2):
            metric.step(pred, gt)
    out = {"sm": sm.get_results()["sm"], "wfm": wfm.get_results()["wfm"],
           "mae": mae.get_results()["mae"]}
    curve = em.get_results()["em"]
    out.update(maxem=curve["curve"].max(), avgem=curve["curve"].mean(), adpem=curve["adp"])
    for name, result in fmv2.get_results().items():
        out.update({f"max{name}": result["dynamic"].max(), f"avg{name}": result["dynamic"].mean(),
                    f"adp{name}": result["adaptive"]})
    return job["dataset"], job["method"], {k: float(v) for k, v in out.items()}
threads = pool.ThreadPool(processes=workers)
results = {}
for dataset, method, values in threads.map(evaluate, jobs):
    results.setdefault(dataset, {})[method] = values
print(json.dumps(results))
"""


def write_inputs(root: Path, pairs: int) -> int:
    """gt/<dataset>/<stem>.png and preds/<method>/<dataset>/<stem><suffix>.png; returns the
    number of GTs (``pairs`` / 3, split over the datasets)."""
    rng = np.random.default_rng(7)
    count = -(-pairs // len(METHODS))
    for k in range(count):
        dataset = list(DATASETS)[k % len(DATASETS)]
        h, w = DATASETS[dataset][::1 if k % 4 < 2 else -1]
        pred, gt = realistic_pair(rng, h, w)
        other = np.clip(cv2.GaussianBlur(pred, (0, 0), 2.0).astype(np.int16) + 8, 0, 255)
        small = cv2.resize(pred, (w // 2, h // 2), interpolation=cv2.INTER_AREA)
        images = {("gt", ""): gt, ("A", ""): pred, ("B", "_sal"): other.astype(np.uint8),
                  ("C", ""): small}
        for (method, suffix), image in images.items():
            folder = root / ("gt" if method == "gt" else f"preds/{method}") / dataset
            folder.mkdir(parents=True, exist_ok=True)
            assert cv2.imwrite(str(folder / f"{k:05d}{suffix}.png"), image)
    return count


def toolkit_configs(root: Path, subset: Path) -> tuple[Path, Path]:
    """The toolkit's dataset and method JSON files for the folders under ``subset``."""
    datasets = {d: {"mask": {"path": str(subset / "gt" / d), "suffix": ".png"}}
                for d in DATASETS}
    methods = {m: {d: {"path": str(subset / "preds" / m / d), "suffix": f"{suffix}.png"}
                   for d in DATASETS} for m, suffix in METHODS.items()}
    paths = root / f"{subset.name}_datasets.json", root / f"{subset.name}_methods.json"
    for path, value in zip(paths, (datasets, methods), strict=True):
        path.write_text(json.dumps(value, indent=1))
    return paths


def build_toolkit(source: str, root: Path) -> tuple[Path | None, str, dict[str, str]]:
    """Clone the toolkit into ``root`` and install what it lacks next to it; returns its
    folder (None: not available), what ran, and the environment to run it with."""
    folder = root / "PySODEvalToolkit"
    clone = subprocess.run(["git", "clone", "-q", "--depth", "1",
                            source if "://" in source or not Path(source).exists()
                            else Path(source).resolve().as_uri(), str(folder)],
                           capture_output=True, text=True)
    if clone.returncode != 0:
        return None, f"cannot clone {source}: {clone.stderr.strip().splitlines()[-1:]}", {}
    commit = subprocess.run(["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    env = dict(os.environ)
    lacking = [m for m in ("tabulate", "yaml", "openpyxl", "matplotlib", "py_sod_metrics")
               if subprocess.run([sys.executable, "-c", f"import {m}"],
                                 capture_output=True).returncode != 0]
    if lacking:
        deps = root / "deps"
        names = {"yaml": "PyYAML", "py_sod_metrics": "pysodmetrics"}
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                              str(deps), *(names.get(m, m) for m in lacking)],
                             capture_output=True, text=True)
        if pip.returncode != 0:
            return None, f"cannot install {', '.join(lacking)} for the toolkit", {}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(deps),
                                                           env.get("PYTHONPATH")]))
    return folder, f"PySODEvalToolkit {commit} (its eval.py)", env


def commands(root: Path, subset: Path, toolkit: Path | None, out: Path,
             workers: int) -> dict[str, list[str]]:
    """Each side's command line (the toolkit's eval.py finds its packages beside it); both
    read the toolkit's own dataset and method JSON files (``sodkit eval --datasets
    --methods``)."""
    data, methods = toolkit_configs(root, subset)
    ours = [sys.executable, "-m", "sodkit", "eval", "--datasets", str(data), "--methods",
            str(methods), "--out", str(out / "ours")]
    if toolkit is None:
        jobs = [{"dataset": d, "method": m, "pairs": [
            (str(g), str(subset / "preds" / m / d / f"{g.stem}{s}.png"))
            for g in sorted((subset / "gt" / d).glob("*.png"))]}
            for d in DATASETS for m, s in METHODS.items()]
        (root / f"{subset.name}_jobs.json").write_text(json.dumps(jobs))
        return {"ours": ours, "toolkit": [sys.executable, "-c", STAND_IN,
                                          str(root / f"{subset.name}_jobs.json"), str(workers)]}
    theirs = [sys.executable, str(toolkit / "eval.py"), "--dataset-json", str(data),
              "--method-json", str(methods), "--metric-names", *TOOLKIT_METRICS,
              "--num-workers", str(workers),
              "--num-bits", "17", "--metric-npy", str(out / "toolkit" / "metrics.npy"),
              "--curves-npy", str(out / "toolkit" / "curves.npy")]
    return {"ours": ours, "toolkit": theirs}


def run(command: list[str], env: dict[str, str]) -> dict:
    """``timed(command)`` with ``env`` set (the toolkit's own packages, if any)."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return timed(command)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def their_results(result: dict, out: Path) -> dict:
    if (out / "toolkit" / "metrics.npy").exists():
        return np.load(out / "toolkit" / "metrics.npy", allow_pickle=True).item()
    return json.loads(result["stdout"])


def largest_difference(out: Path, theirs: dict) -> float:
    """Over every metric both print, every dataset and method."""
    worst = 0.0
    for dataset, methods in theirs.items():
        ours = json.loads((out / "ours" / dataset / "results.json").read_text())
        for method, values in methods.items():
            for name, value in values.items():
                worst = max(worst, abs(ours[method][NAMES[name]] - float(value)))
    return worst


def one_round(root: Path, subset: Path, toolkit: Path | None, env: dict[str, str],
              workers: int, first: str) -> tuple[dict[str, dict], float]:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    (out / "toolkit").mkdir(parents=True)
    lines = commands(root, subset, toolkit, out, workers)
    order = [first, *(side for side in lines if side != first)]
    times = {side: run(lines[side], env if side == "toolkit" else {}) for side in order}
    return times, largest_difference(out, their_results(times["toolkit"], out))


def report(rounds: list, fixed: list, pairs: int, gts: int, ran: str, workers: int) -> str:
    def med(rows: list, side: str, key: str) -> float:
        return statistics.median(r[0][side][key] for r in rows)

    ratios = [r[0]["toolkit"]["wall"] / r[0]["ours"]["wall"] for r in rounds]
    cpu = statistics.median(r[0]["toolkit"]["cpu"] / r[0]["ours"]["cpu"] for r in rounds)
    lines = [f"| command ({gts} GTs x 3 methods = {pairs} pairs, 2 datasets; median of "
             f"{len(rounds)} rounds) | wall s | CPU s |", "|---|---:|---:|",
             f"| `sodkit eval --datasets DATASETS.json --methods METHODS.json --out OUT` (the "
             f"toolkit's own files) | {med(rounds, 'ours', 'wall'):.2f} | "
             f"{med(rounds, 'ours', 'cpu'):.2f} |",
             f"| {ran}, {workers} threads (`--num-workers {workers}`) | "
             f"{med(rounds, 'toolkit', 'wall'):.2f} | {med(rounds, 'toolkit', 'cpu'):.2f} |",
             f"| fixed cost: `sodkit eval` on 2 GTs x 3 methods | "
             f"{med(fixed, 'ours', 'wall'):.2f} | {med(fixed, 'ours', 'cpu'):.2f} |",
             f"| fixed cost: the toolkit on 2 GTs x 3 methods | "
             f"{med(fixed, 'toolkit', 'wall'):.2f} | {med(fixed, 'toolkit', 'cpu'):.2f} |"]
    worst = max(r[1] for r in rounds)
    met = "met" if statistics.median(ratios) >= 10 else "not met"
    walls = {side: " / ".join(f"{r[0][side]['wall']:.2f}" for r in rounds)
             for side in ("ours", "toolkit")}
    return "\n".join(lines) + (
        f"\n\nsodkit eval is **{statistics.median(ratios):.1f}x** faster in wall time "
        f"({min(ratios):.1f}x-{max(ratios):.1f}x over the rounds; CPU time {cpu:.1f}x). The "
        f"goal of #25, 10x on 1,000+ pairs, is {met} here. Largest difference over every "
        f"metric both print: {worst:.1e}. Each round's "
        f"wall times: ours {walls['ours']} s, the toolkit {walls['toolkit']} s.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1050)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--toolkit-source", default=TOOLKIT_URL,
                        help="a git URL or a local clone of PySODEvalToolkit")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    adopt_orphans()
    load = os.getloadavg()[0]
    workers = len(DATASETS) * len(METHODS)  # a thread per job: the most the toolkit uses
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gts = write_inputs(root / "full", args.pairs)
        write_inputs(root / "one", 6)  # a GT per dataset, every method: the fixed cost
        toolkit, ran, env = build_toolkit(args.toolkit_source, root)
        if toolkit is None:
            print(f"toolkit not available ({ran}): the faithful stand-in loop runs", flush=True)
            ran = "stand-in for PySODEvalToolkit (its loop and threads over PySODMetrics)"
        rounds, fixed = [], []
        for i in range(args.rounds):
            first = "ours" if i % 2 == 0 else "toolkit"
            rounds.append(one_round(root, root / "full", toolkit, env, workers, first))
            fixed.append(one_round(root, root / "one", toolkit, env, workers, first))
            print(f"round {i + 1}: " + ", ".join(f"{side} {t['wall']:.2f} s" for side, t in
                                                 rounds[-1][0].items()), flush=True)
    text = report(rounds, fixed, len(METHODS) * gts, gts, ran, workers)
    print(text)
    if args.write:
        source = ("" if args.toolkit_source == TOOLKIT_URL
                  else f" --toolkit-source {args.toolkit_source}")
        header = (f"### sodkit eval against PySODEvalToolkit\n\nCommand: `.venv/bin/python "
                  f"benchmarks/eval_vs_toolkit.py --pairs {args.pairs} --rounds {args.rounds}"
                  f"{source} --write` ({platform.machine()}, {os.cpu_count()} cores, load average "
                  f"{load:.1f} at the start and {os.getloadavg()[0]:.1f} at the end, "
                  f"{time.strftime('%Y-%m-%d %H:%M')}). Wall and CPU time of each fresh process "
                  f"(start and imports included, every descendant's CPU), rounds alternating "
                  f"which side goes first.\n\n")
        write_block("eval_vs_toolkit", header + text)


if __name__ == "__main__":
    main()
