"""How good is the demo model? Its test metrics next to two trivial predictors.

The demo's acceptance bar: MAE at most half that of the best constant prediction and of the best
centred Gaussian prior, and max F-measure >= 0.8. Run after ``make demo``:

    .venv/bin/python benchmarks/demo_baselines.py [--run output/demo] [--write]

The baselines are measured with ``SODMetrics`` on the same GT files; the constant is searched over
all 256 uint8 values (MAE picks the best), the Gaussian's sigma over a grid of fractions of the
image side.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np

from sodkit.config import load_config
from sodkit.data import find_pairs, read_mask, resolve_dataset
from sodkit.metrics import SODMetrics

RESULTS = Path(__file__).with_name("RESULTS.md")


def gaussian(shape: tuple[int, int], sigma: float) -> np.ndarray:
    h, w = shape
    y = (np.arange(h) + 0.5) / h - 0.5
    x = (np.arange(w) + 0.5) / w - 0.5
    g = np.exp(-(y[:, None] ** 2 + x[None, :] ** 2) / (2 * sigma**2))
    return np.rint(g / g.max() * 255).astype(np.uint8)


def score(gts: list[np.ndarray], make) -> dict[str, float]:
    metrics = SODMetrics()
    for gt in gts:
        metrics.update(make(gt.shape), gt)
    result = metrics.compute()
    return {"MAE": result["MAE"], "maxFm": result["maxFm"]}


def best_constant(gts: list[np.ndarray]) -> tuple[int, dict[str, float]]:
    # MAE of a constant c is linear in |c - gt| sums: find it in closed form over 256 values
    maes = [np.mean([np.abs(c / 255.0 - (gt > 128)).mean() for gt in gts]) for c in range(256)]
    value = int(np.argmin(maes))
    return value, score(gts, lambda shape: np.full(shape, value, np.uint8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default="output/demo", help="the demo's run folder")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    run = Path(args.run)
    cfg = load_config(run / "config.yaml")
    ours = json.loads((run / "results.json").read_text())
    lines = []
    for entry in cfg.data.test:
        dataset = resolve_dataset(entry, cfg.data_root)
        gts = [read_mask(p.mask) for p in find_pairs(dataset)]
        const, const_scores = best_constant(gts)
        sigmas = [0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4]
        priors = {s: score(gts, lambda shape, s=s: gaussian(shape, s)) for s in sigmas}
        sigma = min(priors, key=lambda s: priors[s]["MAE"])
        model = ours[dataset.name]
        lines += [
            f"| {dataset.name} ({len(gts)} images) | MAE | maxFm |", "|---|---:|---:|",
            f"| demo model (`{run}`) | {model['MAE']:.4f} | {model['maxFm']:.4f} |",
            f"| best constant ({const}) | {const_scores['MAE']:.4f} "
            f"| {const_scores['maxFm']:.4f} |",
            f"| best centred Gaussian (sigma {sigma} x side) | {priors[sigma]['MAE']:.4f} "
            f"| {priors[sigma]['maxFm']:.4f} |",
            "",
            f"Model MAE / best baseline MAE: "
            f"{model['MAE'] / min(const_scores['MAE'], priors[sigma]['MAE']):.3f} "
            f"(bar: <= 0.5); max F-measure {model['maxFm']:.4f} (bar: >= 0.8).",
            "",
        ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        stamp = time.strftime("%Y-%m-%d")
        section = (f"<!-- demo_baselines -->\n## Demo model vs trivial predictors\n\nCommand: "
                   f"`make demo && .venv/bin/python benchmarks/demo_baselines.py --write` "
                   f"({stamp}).\n\n{text}\n<!-- /demo_baselines -->")
        old = RESULTS.read_text() if RESULTS.exists() else "# Benchmarks\n"
        pattern = re.compile(r"<!-- demo_baselines -->.*<!-- /demo_baselines -->", re.S)
        new = pattern.sub(lambda _: section, old) if pattern.search(old) else old + "\n" + section
        RESULTS.write_text(new.rstrip() + "\n")


if __name__ == "__main__":
    main()
