"""Curve plots of E-measure, IoU and Dice next to PR and F (#25): ``sodkit eval --curves``
writes them, ``curves.json`` keeps the curves (equal to PySODMetrics'), and each figure holds
a line per method with that method's curve."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from sodkit.report.curve_kinds import KINDS, parse_kinds
from sodkit.report.tables import curve_figure
from tests.metrics_fixtures import reference_metrics


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)


@pytest.fixture()
def evaluated(tmp_path: Path) -> tuple[Path, dict]:
    """An eval output of methods a and b on 4 pairs (--curves all), and b's reference."""
    rng = np.random.default_rng(7)
    pairs = []
    for i, (h, w) in enumerate([(40, 50), (36, 36), (41, 30), (30, 44)]):
        pred, gt = realistic_pair(rng, h, w)
        write_png(tmp_path / "gt" / f"im{i}.png", gt)
        write_png(tmp_path / "a" / f"im{i}.png", pred)
        write_png(tmp_path / "b" / f"im{i}.png", 255 - pred)
        pairs.append((255 - pred, gt))
    out = tmp_path / "out"
    assert main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "a"),
                 "--pred", str(tmp_path / "b"), "--out", str(out), "--curves", "all"]) == 0
    return out, reference_metrics(pairs)


def test_eval_writes_every_curve_plot_and_keeps_the_curves(evaluated):
    out, reference = evaluated
    for kind in KINDS:
        image = cv2.imread(str(out / f"{kind}.png"))
        assert image is not None and image.shape == (540, 600, 3)  # 5 x 4.5 in at 120 dpi
    curves = json.loads((out / "curves.json").read_text())
    for key in ("em_curve", "iou_curve", "dice_curve", "fm_curve"):
        np.testing.assert_allclose(curves["b"][key], reference[key], rtol=0, atol=1e-12)


def test_each_figure_draws_each_methods_curve(evaluated):
    out, _ = evaluated
    curves = json.loads((out / "curves.json").read_text())
    for name, (key, label) in {"em": ("em_curve", "E-measure"), "iou": ("iou_curve", "IoU"),
                               "dice": ("dice_curve", "Dice")}.items():
        axes = curve_figure(curves, name).axes[0]
        assert axes.get_ylabel() == label and axes.get_xlabel() == "Threshold"
        assert [t.get_text() for t in axes.get_legend().get_texts()] == ["a", "b"]
        for line, method in zip(axes.lines, ("a", "b"), strict=True):
            np.testing.assert_array_equal(line.get_ydata(), curves[method][key])
            np.testing.assert_array_equal(line.get_xdata(), np.arange(255, -1, -1))
    pr = curve_figure(curves, "pr").axes[0]
    np.testing.assert_array_equal(pr.lines[0].get_xdata(), curves["a"]["recall_curve"])


def test_default_plots_stay_pr_and_fm(tmp_path):
    write_png(tmp_path / "gt" / "x.png", np.full((8, 8), 255, np.uint8))
    write_png(tmp_path / "m" / "x.png", np.full((8, 8), 200, np.uint8))
    out = tmp_path / "out"
    assert main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "m"),
                 "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["fm.png", "pr.png"]


def test_curves_option_is_checked(capsys):
    assert parse_kinds("dice,pr") == ("pr", "dice")
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        main(["eval", "--gt", "g", "--pred", "p", "--out", "o", "--curves", "roc"])
    assert stop.value.code == 2
    assert "choose from pr, fm, em, iou, dice or all" in capsys.readouterr().err
