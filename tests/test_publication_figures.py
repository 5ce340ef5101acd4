"""Publication figures (#25): ``sodkit report --figures DIR --figure-style FILE`` writes one
figure per kind of curve, a panel per dataset and one shared legend, as PNG, PDF and SVG; the
style file sets colours, dashes, aliases, order, highlighted methods, axis limits and ticks.
Checked on the Figure object and on the files read back (SVG text, PDF header, PNG pixels)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import cv2
import numpy as np
import pytest
from matplotlib.colors import to_hex

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from sodkit.report.figure_style import FigureStyle, read_figure_style
from sodkit.report.publication import publication_figure

STYLE = """
methods:
  - {name: A, label: "Alpha$_{20}$", color: "#1f77b4", linestyle: "--"}
  - {name: ours, label: Ours}
  - B
highlight: [ours]
datasets:
  - {name: D2, label: Second}
  - D1
axes:
  pr: {xlim: [0.2, 1], ylim: [0.4, 1], xticks: [0.2, 0.6, 1.0], yticks: [0.4, 0.7, 1.0]}
columns: 2
panel_size: [3, 2.5]
dpi: 80
formats: [png, pdf, svg]
"""


def eval_output(tmp_path: Path) -> Path:
    """A sodkit eval output: methods ours, A, B on datasets D1, D2 (3 small pairs each)."""
    rng = np.random.default_rng(11)
    args = ["eval", "--out", str(tmp_path / "ev"), "--curves", "pr"]
    for dataset in ("D1", "D2"):
        for i in range(3):
            pred, gt = realistic_pair(rng, 30 + i, 36)
            cv2.imwrite(str(_mkdir(tmp_path / "gt" / dataset) / f"x{i}.png"), gt)
            for k, method in enumerate(("ours", "A", "B")):
                cv2.imwrite(str(_mkdir(tmp_path / method / dataset) / f"x{i}.png"),
                            np.roll(pred, 2 * k, axis=0))
        args += ["--gt", f"{dataset}={tmp_path / 'gt' / dataset}"]
    for method in ("ours", "A", "B"):
        args += ["--pred", f"{method}={tmp_path / method}"]
    assert main(args) == 0
    return tmp_path / "ev"


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture()
def curves(tmp_path: Path) -> tuple[Path, dict]:
    out = eval_output(tmp_path)
    return out, {d: json.loads((out / d / "curves.json").read_text()) for d in ("D1", "D2")}


def test_style_sets_panels_lines_legend_and_axes(curves, tmp_path):
    _, data = curves
    path = tmp_path / "style.yaml"
    path.write_text(STYLE)
    figure = publication_figure(data, "pr", read_figure_style(path))
    panels = [axes for axes in figure.axes if axes.axison]
    assert [axes.get_title() for axes in panels] == ["Second", "D1"]  # the style's order
    for axes, dataset in zip(panels, ("D2", "D1"), strict=True):
        assert [line.get_label() for line in axes.lines] == ["Ours", "Alpha$_{20}$", "B"]
        ours, alpha, b = axes.lines
        assert to_hex(ours.get_color()) == "#ff0000" and ours.get_linewidth() > b.get_linewidth()
        assert ours.get_zorder() > b.get_zorder()  # drawn on top
        assert to_hex(alpha.get_color()) == "#1f77b4" and alpha.get_linestyle() == "--"
        np.testing.assert_array_equal(ours.get_xdata(), data[dataset]["ours"]["recall_curve"])
        assert axes.get_xlim() == (0.2, 1.0) and axes.get_ylim() == (0.4, 1.0)
        assert list(axes.get_xticks()) == [0.2, 0.6, 1.0]
        assert list(axes.get_yticks()) == [0.4, 0.7, 1.0]
        assert axes.get_legend() is None  # one legend for the figure, not one per panel
    assert len(figure.legends) == 1
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["Ours", "Alpha$_{20}$", "B"]
    assert tuple(figure.get_size_inches()) == (6.0, 2.5 + 0.6)


def test_default_style_draws_every_method_and_dataset(curves):
    _, data = curves
    figure = publication_figure(data, "fm", FigureStyle())
    panels = [axes for axes in figure.axes if axes.axison]
    assert [axes.get_title() for axes in panels] == ["D1", "D2"]
    assert [axes.get_ylabel() for axes in panels] == ["F-measure"] * 2
    colours = {to_hex(line.get_color()) for line in panels[0].lines}
    assert len(colours) == 3  # every method its own colour
    assert [t.get_text() for t in figure.legends[0].get_texts()] == ["ours", "A", "B"]


def test_report_writes_png_pdf_and_svg(curves, tmp_path):
    out, _ = curves
    style = tmp_path / "style.yaml"
    style.write_text(STYLE)
    figures = tmp_path / "figs"
    assert main(["report", str(out), "--out", str(tmp_path / "page.html"), "--figures",
                 str(figures), "--figure-style", str(style), "--curves", "pr,iou"]) == 0
    assert sorted(p.name for p in figures.iterdir() if not p.name.startswith(".")) == [
        "iou.pdf", "iou.png", "iou.svg", "pr.pdf", "pr.png", "pr.svg"]
    image = cv2.imread(str(figures / "pr.png"))
    height, width = image.shape[:2]  # the style's size and dpi: 6 x 3.1 inches at 80
    assert width == 480 and abs(height - 248) <= 1
    assert (figures / "pr.pdf").read_bytes().startswith(b"%PDF-")
    texts = [node.text for node in ET.parse(figures / "iou.svg").iter()
             if node.tag.endswith("text") and node.text]
    for expected in ("Second", "D1", "Ours", "B", "IoU", "Threshold"):
        assert expected in texts, (expected, texts)
    assert sum(text == "Ours" for text in texts) == 1  # one legend


@pytest.mark.parametrize("text, message", [
    ("colour: red\n", "the file: unknown key(s) colour"),
    ("methods: [{name: A, color: reddish}]\n", "methods[0].color: 'reddish' is not a colour"),
    ("methods: [{name: A, linestyle: wavy}]\n", "methods[0].linestyle: choose from"),
    ("methods: [{name: A, label: 'a$_{'}]\n", "methods[0].label: 'a$_{' is not valid mathtext"),
    ("axes: {pr: {xlim: [1, 0]}}\n", "axes.pr.xlim: the first number must be the smaller"),
    ("axes: {roc: {}}\n", "axes: unknown key(s) roc"),
    ("axes: {pr: {xticks: .nan}}\n", "axes.pr.xticks: expected a list"),
    ("dpi: 100000\n", "dpi: expected a whole number in [50, 1200]"),
    ("formats: [png, gif]\n", "formats: choose from png, pdf, svg"),
    ("highlight: [nobody]\n", "highlight nobody: no such method in the results"),
    ("datasets: [D9]\n", "dataset(s) D9 have no curves"),
])
def test_a_bad_style_is_one_line_and_writes_nothing(curves, tmp_path, capsys, text, message):
    out, _ = curves
    style = tmp_path / "bad.yaml"
    style.write_text(text)
    page = tmp_path / "page.html"
    code = main(["report", str(out), "--out", str(page), "--figures", str(tmp_path / "figs"),
                 "--figure-style", str(style)])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "figs").exists() and not page.exists()


def test_report_selection_applies_to_page_tables_and_figures(curves, tmp_path, capsys):
    out, _ = curves
    table, figures = tmp_path / "t.tex", tmp_path / "figs"
    assert main(["report", str(out), "--out", str(tmp_path / "page.html"), "--latex",
                 str(table), "--figures", str(figures), "--exclude-methods", "B",
                 "--include-datasets", "D2"]) == 0
    text = table.read_text()
    assert "{D2}" in text and "{D1}" not in text
    rows = [line.split(" & ")[0] for line in text.splitlines() if line.endswith("\\\\")]
    assert rows[2:] == ["ours", "A"]
    svg = [node.text for node in ET.parse(figures / "pr.svg").iter()
           if node.tag.endswith("text") and node.text]
    assert "B" not in svg and "ours" in svg and "D2" in svg and "D1" not in svg
    page = (tmp_path / "page.html").read_text()
    assert ">D1<" not in page and ">D2<" in page
    assert main(["report", str(out), "--out", str(tmp_path / "p2.html"), "--include-methods",
                 "C"]) == 2
    assert "--include-methods C: no such method; known: ours, A, B" in capsys.readouterr().err


@pytest.mark.parametrize("text, env, message", [
    ("dpi: 1200\npanel_size: [30, 30]\n", {}, "is 36000 x 72720 pixels"),  # 2 panels a column
    ("columns: 20\npanel_size: [30, 2]\ndpi: 1200\n", {}, "lower dpi (at most 1092"),
    ("dpi: 300\n", {"SODKIT_MAX_PIXELS": "1000000"}, "SODKIT_MAX_PIXELS=1000000 in all"),
])
def test_a_figure_of_too_many_pixels_is_refused_before_drawing(curves, tmp_path, text, env,
                                                              message):
    """Each setting in range, their product not: panels x panel size x dpi^2 is checked before
    matplotlib allocates the canvas (1.3 gigapixels ended in std::bad_alloc), in a process that
    may grow by 512 MiB, one line naming what to lower, nothing written (#32)."""
    from tests.hostile_files import run_capped

    out, _ = curves
    style = tmp_path / "big.yaml"
    style.write_text(text + "columns: 1\n" * ("columns" not in text))
    done = run_capped(["report", str(out), "--out", str(tmp_path / "page.html"), "--figures",
                       str(tmp_path / "figs"), "--figure-style", str(style)], tmp_path,
                      preload=("matplotlib.figure", "matplotlib.backends.backend_agg"), env=env)
    assert done.returncode == 2, done.stderr[-2000:]
    err = done.stderr.strip().splitlines()
    assert message in err[-1] and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "figs").exists() and not (tmp_path / "page.html").exists()


def test_a_large_vector_only_figure_is_drawn(curves, tmp_path):
    """PDF and SVG have no canvas of pixels: the same size and dpi are drawn."""
    out, _ = curves
    style = tmp_path / "big.yaml"
    style.write_text("dpi: 1200\npanel_size: [30, 30]\nformats: [pdf]\n")
    assert main(["report", str(out), "--out", str(tmp_path / "page.html"), "--figures",
                 str(tmp_path / "figs"), "--figure-style", str(style), "--curves", "pr"]) == 0
    assert (tmp_path / "figs" / "pr.pdf").read_bytes().startswith(b"%PDF")
