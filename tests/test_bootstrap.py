"""Confidence intervals by bootstrap over images (``sodkit.metrics.bootstrap``, ``sodkit eval
--ci``, issue #25): the resampled metric is the dataset-level metric of the weighted images (maxF
on the averaged curve included), the intervals cover a known truth about 95% of the time, the
paired comparison finds a real difference and not a null one, and ``sodkit eval`` writes them."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics import SODMetrics
from sodkit.metrics.bootstrap import Columns, bootstrap
from sodkit.metrics.records import SCALARS, Records
from sodkit.metrics.results import summarize
from sodkit.metrics.testing import realistic_pair, realistic_pairs


def measured(pairs, families=None) -> Records:
    metrics = SODMetrics(families=families)
    for pred, gt in pairs:
        metrics.update(pred, gt)
    return metrics.records()


@pytest.fixture(scope="module")
def records() -> Records:
    return measured(realistic_pairs(24, 40, 48, seed=3), families="MSE,BIoU,mBA")


def test_weights_of_one_reproduce_every_result(records):
    """A weighting of ones is the dataset itself: every key, the families' too, as computed."""
    columns = Columns.of(records)
    values = columns.values(np.ones((1, len(records))))[0]
    expected = summarize(records)
    assert columns.names() == [k for k in expected if not k.endswith("_curve")]
    for key, value in zip(columns.names(), values, strict=True):
        assert value == pytest.approx(expected[key], abs=1e-12, nan_ok=True), key


def test_doubling_an_image_equals_measuring_it_twice(records):
    """Weights are image counts: weight 2 is the image measured twice (maxF on the curve)."""
    weights = np.ones((1, len(records)))
    weights[0, 5] = 2
    weights[0, 7] = 0
    twice = Records.concatenate([records, Records(
        np.array([1000]), records.hist[5:6], records.adaptive[5:6], records.scalars[5:6],
        {k: v[5:6] for k, v in records.extra.items()})])
    keep = twice.index != records.index[7]
    twice = Records(twice.index[keep], twice.hist[keep], twice.adaptive[keep],
                    twice.scalars[keep], {k: v[keep] for k, v in twice.extra.items()})
    expected = summarize(twice)
    columns = Columns.of(records)
    for key, value in zip(columns.names(), columns.values(weights)[0], strict=True):
        assert value == pytest.approx(expected[key], abs=1e-12, nan_ok=True), key


def test_intervals_hold_the_value_and_are_seeded(records):
    result = bootstrap({"m": records}, resamples=300, seed=1)
    for key in ("MAE", "Smeasure", "wFmeasure", "maxFm", "meanEm", "maxKappa", "MSE", "maxBIoU"):
        interval = result["intervals"]["m"][key]
        assert interval["low"] < interval["value"] < interval["high"], (key, interval)
    assert bootstrap({"m": records}, resamples=300, seed=1) == result
    assert bootstrap({"m": records}, resamples=300, seed=2) != result


def _synthetic(rng: np.random.Generator, means: np.ndarray) -> Records:
    """Records whose per-image MAE values are ``means`` (histograms irrelevant to MAE)."""
    count = len(means)
    hist = np.zeros((count, 2, 256), np.int32)
    hist[:, 0, 0] = 90
    hist[:, 1, 255] = 10
    scalars = np.zeros((count, len(SCALARS)))
    scalars[:, 0] = means
    return Records(np.arange(count), hist, np.tile([[10, 0]], (count, 1)), scalars)


def test_intervals_cover_a_known_difference_about_95_percent_of_the_time():
    """Two methods on the same images, B's per-image MAE = A's + 0.01 + noise: the population
    difference is 0.01 and A's population mean 0.1. Over 150 data sets drawn with a fixed seed,
    the 95% intervals of A's MAE and of the paired difference contain the truth 0.89-0.99 of
    the time (95%, within 3 binomial standard deviations)."""
    rng = np.random.default_rng(12345)
    draws, images, difference = 150, 60, 0.01
    covered = {"mean": 0, "difference": 0}
    for draw in range(draws):
        a = rng.uniform(0.0, 0.2, images)
        b = a + difference + rng.normal(0.0, 0.02, images)
        result = bootstrap({"A": _synthetic(rng, a), "B": _synthetic(rng, b)}, resamples=400,
                           seed=draw, baseline="A")
        interval = result["intervals"]["A"]["MAE"]
        covered["mean"] += interval["low"] <= 0.1 <= interval["high"]
        diff = result["comparisons"]["B"]["MAE"]
        covered["difference"] += diff["low"] <= difference <= diff["high"]
    rates = {k: v / draws for k, v in covered.items()}
    assert all(0.89 <= rate <= 0.99 for rate in rates.values()), rates


def test_a_paired_comparison_finds_a_real_difference_and_not_a_null_one():
    rng = np.random.default_rng(7)
    a = rng.uniform(0.0, 0.2, 200)
    records = {"A": _synthetic(rng, a), "same": _synthetic(rng, a.copy()),
               "worse": _synthetic(rng, a + 0.01 + rng.normal(0, 0.02, 200))}
    result = bootstrap(records, resamples=500, baseline="A")["comparisons"]
    assert result["same"]["MAE"] == {"difference": 0.0, "low": 0.0, "high": 0.0, "p": 1.0,
                                     "excludes_zero": False}
    worse = result["worse"]["MAE"]
    assert worse["excludes_zero"] and worse["low"] > 0 and worse["p"] < 0.01, worse


def test_methods_on_other_images_are_refused(records):
    other = measured(realistic_pairs(3, 20, 20))
    with pytest.raises(ValueError, match="same images"):
        bootstrap({"a": records, "b": other})


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)


def test_sodkit_eval_writes_intervals_and_comparisons(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for i in range(12):
        pred, gt = realistic_pair(rng, 40, 50)
        write_png(tmp_path / "gt" / f"im{i}.png", gt)
        write_png(tmp_path / "good" / f"im{i}.png", gt)  # perfect
        write_png(tmp_path / "fair" / f"im{i}.png", pred)
        write_png(tmp_path / "copy" / f"im{i}.png", pred)  # the baseline's maps again
    out, tex = tmp_path / "out", tmp_path / "table.tex"
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "good"),
                 "--pred", str(tmp_path / "fair"), "--pred", str(tmp_path / "copy"),
                 "--out", str(out), "--baseline", "fair", "--ci-resamples", "200",
                 "--latex", str(tex), "--latex-ci", "--metrics", "MAE,maxFm"])
    assert code == 0
    printed = capsys.readouterr().out
    result = json.loads((out / "ci.json").read_text())
    results = json.loads((out / "results.json").read_text())
    assert (result["images"], result["resamples"], result["baseline"]) == (12, 200, "fair")
    for method in ("good", "fair"):
        for key, value in results[method].items():
            assert result["intervals"][method][key]["value"] == pytest.approx(value, nan_ok=True)
    better = result["comparisons"]["good"]["maxFm"]
    assert better["excludes_zero"] and better["difference"] > 0 and better["p"] < 0.05
    rows = list(csv.DictReader((out / "ci.csv").open()))
    assert {(r["method"], r["metric"]) for r in rows} >= {("good", "maxFm"), ("fair", "MAE")}
    assert next(r for r in rows if (r["method"], r["metric"]) == ("good", "maxFm"))[
        "excludes_zero"] == "True"
    assert "95% intervals: percentile bootstrap, 200 resamples of 12 images" in printed
    assert "| good - fair |" in printed and " *" in printed
    assert result["comparisons"]["copy"]["maxFm"]["excludes_zero"] is False
    rows = {line.split(" & ")[0]: line for line in tex.read_text().splitlines() if " & " in line}
    assert rows["copy"].count("$^\\dagger$") == 2 and "dagger" not in rows["good"], rows
    assert "not significantly different from fair" in tex.read_text()

    page = tmp_path / "page.html"  # sodkit report --ci shows what eval saved
    assert main(["report", str(out), "--out", str(page), "--ci"]) == 0
    text = page.read_text()
    good = result["intervals"]["good"]["maxFm"]
    assert "<h2>Confidence intervals</h2>" in text
    assert f"{good['value']:.4f} [{good['low']:.4f}, {good['high']:.4f}]" in text
    assert f"{better['difference']:+.4f} [{better['low']:+.4f}, {better['high']:+.4f}]" in text


def test_report_ci_without_saved_intervals_says_what_to_do(tmp_path, capsys):
    write_png(tmp_path / "gt" / "a.png", np.zeros((4, 4), np.uint8))
    write_png(tmp_path / "m" / "a.png", np.zeros((4, 4), np.uint8))
    assert main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "m"),
                 "--out", str(tmp_path / "out")]) == 0
    code = main(["report", str(tmp_path / "out"), "--out", str(tmp_path / "p.html"), "--ci"])
    assert code == 2
    assert "--ci: none of the folders holds a ci.json; evaluate with sodkit eval --ci" in \
        capsys.readouterr().err


def test_an_unknown_baseline_is_refused_before_any_work(tmp_path, capsys):
    write_png(tmp_path / "gt" / "a.png", np.zeros((4, 4), np.uint8))
    write_png(tmp_path / "m" / "a.png", np.zeros((4, 4), np.uint8))
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "m"),
                 "--out", str(tmp_path / "out"), "--baseline", "nope"])
    assert code == 2
    assert "--baseline nope: no method of that name; the methods are m" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_report_leaves_out_intervals_older_than_the_results(tmp_path, caplog):
    """An evaluation without --ci into the same folder leaves the older ci.json: the report says
    so and does not show intervals of other numbers."""
    rng = np.random.default_rng(1)
    for i in range(10):
        pred, gt = realistic_pair(rng, 30, 30)
        write_png(tmp_path / "gt" / f"im{i}.png", gt)
        write_png(tmp_path / "m" / f"im{i}.png", pred)
    args = ["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "m"), "--out",
            str(tmp_path / "out")]
    assert main([*args, "--ci", "--ci-resamples", "100"]) == 0
    write_png(tmp_path / "m" / "im0.png", np.zeros((30, 30), np.uint8))  # other predictions
    assert main(args) == 0
    assert (tmp_path / "out" / "ci.json").exists()
    from sodkit.report.sources import load_source

    with caplog.at_level("WARNING"):
        source = load_source(tmp_path / "out")
    assert source.ci == {} and "differ from results.json beside it" in caplog.text


def test_latex_ci_without_a_baseline_is_refused_before_any_work(tmp_path, capsys):
    write_png(tmp_path / "gt" / "a.png", np.zeros((4, 4), np.uint8))
    write_png(tmp_path / "m" / "a.png", np.zeros((4, 4), np.uint8))
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "m"),
                 "--out", str(tmp_path / "out"), "--ci", "--latex", str(tmp_path / "t.tex"),
                 "--latex-ci"])
    assert code == 2
    assert "--latex-ci marks the LaTeX table's values that do not differ significantly from a " \
           "baseline: add --latex FILE.tex and --baseline NAME" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "t.tex").exists()
