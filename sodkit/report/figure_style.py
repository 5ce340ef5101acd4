"""The figure style file of ``sodkit report --figure-style`` (#25): how publication figures look.

PySODEvalToolkit spreads this over a matplotlib style file, an alias file and ``--our-methods``;
here it is one YAML file, every key optional, every value checked before anything is drawn
(an unknown key or a bad colour is one line naming it)::

    methods:                      # legend order, aliases and line styles; only these are drawn
      - {name: ours, label: Ours, color: red, linestyle: "-", linewidth: 2.5}
      - {name: MINet, color: "#1f77b4", linestyle: "--"}
      - F3Net                     # a plain name: the next default colour and dash
    highlight: [ours]             # your methods: first in the legend, drawn on top, thicker,
                                  # red unless a colour is given
    datasets:                     # panel order and titles; only these are drawn
      - {name: DUTS-TE, label: DUTS-TE}
      - ECSSD
    axes:                         # per curve kind (pr, fm, em, iou, dice)
      pr: {xlim: [0.5, 1], ylim: [0.6, 1], xticks: [0.5, 0.75, 1], yticks: [0.6, 0.8, 1]}
    columns: 3                    # panels per row
    panel_size: [4, 3.5]          # inches
    legend_columns: 4             # default: one row when it fits
    dpi: 300                      # of the PNG
    font_size: 10
    formats: [png, pdf, svg]

Labels may hold mathtext (``DANet$_{20}$``); it is checked here. Method names without a label
are drawn literally (a ``$`` in a folder name is not a formula).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError

FORMATS = ("png", "pdf", "svg")
LINESTYLES = ("-", "--", "-.", ":", "solid", "dashed", "dashdot", "dotted")
_TOP_KEYS = {"methods", "highlight", "datasets", "axes", "columns", "panel_size",
             "legend_columns", "dpi", "font_size", "formats"}
_METHOD_KEYS = {"name", "label", "color", "linestyle", "linewidth"}
_DATASET_KEYS = {"name", "label"}
_AXES_KEYS = {"xlim", "ylim", "xticks", "yticks", "xlabel", "ylabel"}
MAX_TICKS = 50


@dataclass
class LineStyle:
    label: str | None = None
    color: str | None = None
    linestyle: str | None = None
    linewidth: float | None = None


@dataclass
class FigureStyle:
    """A checked style file (defaults: every method and dataset, in the results' order)."""

    methods: dict[str, LineStyle] | None = None  # None: all methods, default styles
    highlight: list[str] = field(default_factory=list)
    datasets: dict[str, str] | None = None  # name -> panel title
    axes: dict[str, dict[str, Any]] = field(default_factory=dict)
    columns: int = 3
    panel_size: tuple[float, float] = (4.0, 3.5)
    legend_columns: int | None = None
    dpi: int = 300
    font_size: float = 10.0
    formats: tuple[str, ...] = FORMATS


class _Checker:
    """Checks values of one file, naming the file and key in every error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, what: str) -> UserError:
        return UserError(f"--figure-style {self.path}: {key}: {what}")

    def keys(self, value: Any, allowed: set[str], key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping with keys {', '.join(sorted(allowed))}")
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise self.fail(key, f"unknown key(s) {', '.join(unknown)}; allowed: "
                                 f"{', '.join(sorted(allowed))}")
        return value

    def number(self, value: Any, key: str, low: float, high: float) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
                value) or not low <= value <= high:
            raise self.fail(key, f"expected a number in [{low:g}, {high:g}], got {value!r}")
        return float(value)

    def integer(self, value: Any, key: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(key, f"expected a whole number in [{low}, {high}], got {value!r}")
        return value

    def numbers(self, value: Any, key: str, count: int | None = None) -> list[float]:
        if not isinstance(value, list) or (count is not None and len(value) != count) or len(
                value) > MAX_TICKS:
            size = f"{count} numbers" if count else f"a list of at most {MAX_TICKS} numbers"
            raise self.fail(key, f"expected {size}, got {value!r}"[:200])
        return [self.number(v, key, -1e6, 1e6) for v in value]

    def text(self, value: Any, key: str, mathtext: bool = False) -> str:
        if not isinstance(value, str) or not value or len(value) > 200:
            raise self.fail(key, f"expected a text of 1 to 200 characters, got {value!r}"[:200])
        if mathtext and "$" in value:
            from matplotlib.mathtext import MathTextParser

            try:
                MathTextParser("path").parse(value)
            except ValueError:
                raise self.fail(key, f"{value!r} is not valid mathtext; escape a literal $ "
                                     f"as \\$") from None
        return value


def _named(checker: _Checker, entry: Any, allowed: set[str], key: str) -> dict[str, Any]:
    if isinstance(entry, str):
        entry = {"name": entry}
    entry = checker.keys(entry, allowed, key)
    entry["name"] = checker.text(entry.get("name"), f"{key}.name")
    return entry


def _method(checker: _Checker, entry: Any, key: str) -> tuple[str, LineStyle]:
    from matplotlib.colors import is_color_like

    entry = _named(checker, entry, _METHOD_KEYS, key)
    style = LineStyle()
    if "label" in entry:
        style.label = checker.text(entry["label"], f"{key}.label", mathtext=True)
    if "color" in entry:
        if not isinstance(entry["color"], str) or not is_color_like(entry["color"]):
            raise checker.fail(f"{key}.color", f"{entry['color']!r} is not a colour (a name "
                                               f"such as red, or #rrggbb)")
        style.color = entry["color"]
    if "linestyle" in entry:
        if entry["linestyle"] not in LINESTYLES:
            raise checker.fail(f"{key}.linestyle", f"choose from {', '.join(LINESTYLES)}")
        style.linestyle = entry["linestyle"]
    if "linewidth" in entry:
        style.linewidth = checker.number(entry["linewidth"], f"{key}.linewidth", 0.1, 20)
    return entry["name"], style


def _axes(checker: _Checker, value: Any) -> dict[str, dict[str, Any]]:
    from .curve_kinds import KINDS

    out: dict[str, dict[str, Any]] = {}
    for kind, settings in checker.keys(value, set(KINDS), "axes").items():
        key = f"axes.{kind}"
        settings = checker.keys(settings, _AXES_KEYS, key)
        checked: dict[str, Any] = {}
        for name in ("xlim", "ylim"):
            if name in settings:
                low, high = checker.numbers(settings[name], f"{key}.{name}", 2)
                if not low < high:
                    raise checker.fail(f"{key}.{name}", "the first number must be the smaller")
                checked[name] = (low, high)
        for name in ("xticks", "yticks"):
            if name in settings:
                checked[name] = checker.numbers(settings[name], f"{key}.{name}")
        for name in ("xlabel", "ylabel"):
            if name in settings:
                checked[name] = checker.text(settings[name], f"{key}.{name}", mathtext=True)
        out[kind] = checked
    return out


def _list(checker: _Checker, value: Any, key: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise checker.fail(key, "expected a non-empty list")
    return value


def add_figure_arguments(parser: argparse.ArgumentParser) -> None:
    """``--figures``, ``--figure-style`` and ``--curves`` of ``sodkit report``."""
    from ..argtypes import user_path
    from .curve_kinds import DEFAULT_KINDS, KINDS, parse_kinds

    group = parser.add_argument_group("publication figures")
    group.add_argument("--figures", metavar="DIR", type=user_path,
                       help="write <kind>.png/.pdf/.svg there: a panel per dataset, one shared "
                            "legend")
    group.add_argument("--figure-style", metavar="FILE.yaml", type=user_path,
                       help="line colours and styles per method, highlighted methods, aliases "
                            "and order of methods and datasets, axis limits and ticks, formats "
                            "(see sodkit/report/figure_style.py)")
    group.add_argument("--curves", type=parse_kinds, default=DEFAULT_KINDS, metavar="KIND,...",
                       help=f"the kinds of figure: {', '.join(KINDS)} or all (default "
                            f"{','.join(DEFAULT_KINDS)})")


def read_figure_style(path: str | Path | None) -> FigureStyle:
    """The style of a YAML file (the defaults without one); a UserError names a bad key."""
    from ..config.yamlio import read_yaml

    if path is None:
        return FigureStyle()
    path = Path(path)
    checker = _Checker(path)
    data = read_yaml(path)  # bounded in size and in what its aliases expand to
    data = checker.keys({} if data is None else data, _TOP_KEYS, "the file")
    style = FigureStyle()
    if "methods" in data:
        entries = [_method(checker, e, f"methods[{i}]")
                   for i, e in enumerate(_list(checker, data["methods"], "methods"))]
        style.methods = dict(entries)
    if "highlight" in data:
        style.highlight = [checker.text(v, "highlight")
                           for v in _list(checker, data["highlight"], "highlight")]
    if "datasets" in data:
        named = [_named(checker, e, _DATASET_KEYS, f"datasets[{i}]")
                 for i, e in enumerate(_list(checker, data["datasets"], "datasets"))]
        style.datasets = {e["name"]: checker.text(e.get("label", e["name"]), "datasets.label",
                                                  mathtext="label" in e) for e in named}
    if "axes" in data:
        style.axes = _axes(checker, data["axes"])
    if "columns" in data:
        style.columns = checker.integer(data["columns"], "columns", 1, 20)
    if "panel_size" in data:
        width, height = checker.numbers(data["panel_size"], "panel_size", 2)
        style.panel_size = (checker.number(width, "panel_size", 1, 30),
                            checker.number(height, "panel_size", 1, 30))
    if "legend_columns" in data:
        style.legend_columns = checker.integer(data["legend_columns"], "legend_columns", 1, 50)
    if "dpi" in data:
        style.dpi = checker.integer(data["dpi"], "dpi", 50, 1200)
    if "font_size" in data:
        style.font_size = checker.number(data["font_size"], "font_size", 4, 40)
    if "formats" in data:
        formats = _list(checker, data["formats"], "formats")
        if any(f not in FORMATS for f in formats):
            raise checker.fail("formats", f"choose from {', '.join(FORMATS)}")
        style.formats = tuple(f for f in FORMATS if f in formats)
    return style
