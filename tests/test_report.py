"""Result tables and curve plots, fed with ``SODMetrics.compute()`` output as the evaluator does."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from sodkit.metrics import SODMetrics, scalar_metrics
from sodkit.metrics.testing import realistic_pairs
from sodkit.report import markdown_table, metric_columns, plot_curves, write_results


def computed(seed: int) -> dict:
    metrics = SODMetrics()
    for pred, gt in realistic_pairs(3, 40, 48, seed=seed):
        metrics.update(pred, gt)
    return metrics.compute()


def test_write_results_json_md_csv(tmp_path: Path):
    results = {"ECSSD": {"zeta": 0.5, "maxFm": 0.9, "MAE": 0.04},
               "DUTS-TE": {"MAE": 0.05, "Smeasure": float("nan")}}
    write_results(results, tmp_path / "run", row_label="dataset")
    loaded = json.loads((tmp_path / "run" / "results.json").read_text())
    assert loaded["ECSSD"] == {"zeta": 0.5, "maxFm": 0.9, "MAE": 0.04}
    assert math.isnan(loaded["DUTS-TE"]["Smeasure"])
    lines = (tmp_path / "run" / "results.md").read_text().splitlines()
    # Markdown is for reading: the standard metrics only (#28); every metric is in JSON and CSV
    assert lines[0] == "| dataset | MAE | Smeasure | maxFm |"
    assert lines[2] == "| ECSSD | 0.0400 |  | 0.9000 |"
    assert lines[3] == "| DUTS-TE | 0.0500 | nan |  |"
    assert lines[5] == ("The standard metrics (and those of --compute); all 4 are in results.csv "
                        "and results.json.")
    with open(tmp_path / "run" / "results.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["dataset", "MAE", "Smeasure", "maxFm", "zeta"]
    assert float(rows[1][1]) == 0.04  # full precision, not the table's 4 decimals


def test_standard_metric_order_from_compute():
    columns = metric_columns({"x": scalar_metrics(computed(0))})
    assert columns[:9] == ["MAE", "Smeasure", "wFmeasure", "maxFm", "meanFm", "adpFm",
                           "maxEm", "meanEm", "adpEm"]
    assert "meanIoU" in columns and not any(c.endswith("_curve") for c in columns)


def test_markdown_table_columns_subset():
    table = markdown_table({"m": {"MAE": 0.1, "maxFm": 0.8}}, "method", ["maxFm"])
    assert table.splitlines()[0] == "| method | maxFm |"


def test_plot_curves_accepts_compute_results(tmp_path: Path):
    plot_curves({"method A": computed(1), "method B": computed(2)}, tmp_path / "curves")
    for name in ("pr.png", "fm.png"):
        data = (tmp_path / "curves" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plot_curves_skips_entries_without_curves(tmp_path: Path):
    plot_curves({"scalars only": {"MAE": 0.1}, "m": {"fm_curve": np.linspace(0, 1, 256)}},
                tmp_path)
    assert (tmp_path / "pr.png").exists() and (tmp_path / "fm.png").exists()
