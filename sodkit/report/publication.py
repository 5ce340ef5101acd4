"""Publication figures (#25): one figure per kind of curve, a panel per dataset, one legend
shared by all panels, in PNG, PDF and SVG, styled by a figure style file (:mod:`figure_style`).

``sodkit report FOLDER... --figures DIR`` writes ``DIR/<kind>.<format>`` from the folders'
``curves.json``. PDF embeds TrueType fonts and SVG keeps text as text (``svg.fonttype: none``),
so labels stay editable in Illustrator / Inkscape and searchable.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import UserError
from .curve_kinds import KINDS, points
from .figure_style import FigureStyle, LineStyle
from .tables import plot_label

logger = logging.getLogger(__name__)

Curves = Mapping[str, Mapping[str, Mapping[str, Any]]]  # dataset -> method -> curve name -> list
HIGHLIGHT_COLOR = "red"
HIGHLIGHT_WIDTH = 1.6  # times the others' width
BASE_WIDTH = 1.5
_DASHES = ("-", "--", "-.", ":")
# tab10 without its red (kept for highlighted methods), then tab20's lighter shades
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94",
            "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")


def _order(names: list[str], style: FigureStyle, curves: Curves) -> list[str]:
    """Methods in legend order: highlighted first, then the style file's or the results'."""
    unknown = [m for m in style.highlight if m not in names]
    if unknown:
        raise UserError(f"--figure-style: highlight {', '.join(unknown)}: no such method in the "
                        f"results; known: {', '.join(names)}")
    if style.methods is not None:
        absent = [m for m in style.methods if m not in names]
        if absent:
            logger.warning("--figure-style: method(s) %s not in the results; not drawn",
                           ", ".join(absent))
        left = [m for m in names if m not in style.methods]
        if left:
            logger.info("--figure-style lists no %s; not drawn", ", ".join(left))
        names = [m for m in style.methods if m in names]
    return [m for m in style.highlight if m in names] + [m for m in names
                                                        if m not in style.highlight]


def line_styles(methods: list[str], style: FigureStyle) -> dict[str, dict[str, Any]]:
    """matplotlib keyword arguments per method: the file's settings over the defaults (a
    colour and dash per rank among the others; red and thicker for a highlighted method)."""
    out = {}
    others = 0
    for method in methods:
        own = (style.methods or {}).get(method, LineStyle())
        ours = method in style.highlight
        if ours:
            default = {"color": HIGHLIGHT_COLOR, "linestyle": "-",
                       "linewidth": BASE_WIDTH * HIGHLIGHT_WIDTH, "zorder": 3}
        else:
            default = {"color": _PALETTE[others % len(_PALETTE)],
                       "linestyle": _DASHES[(others // len(_PALETTE)) % len(_DASHES)],
                       "linewidth": BASE_WIDTH, "zorder": 2}
            others += 1
        chosen = {k: v for k, v in (("color", own.color), ("linestyle", own.linestyle),
                                    ("linewidth", own.linewidth)) if v is not None}
        label = own.label if own.label is not None else plot_label(method)
        out[method] = {**default, **chosen, "label": label}
    return out


def _datasets(curves: Curves, style: FigureStyle) -> dict[str, str]:
    if style.datasets is None:
        return {name: plot_label(name) for name in curves}
    unknown = [d for d in style.datasets if d not in curves]
    if unknown:
        raise UserError(f"--figure-style: dataset(s) {', '.join(unknown)} have no curves; "
                        f"known: {', '.join(curves)}")
    return dict(style.datasets)


def publication_figure(curves: Curves, kind_name: str, style: FigureStyle) -> Any:
    """The ``Figure``: a panel per dataset (the style's order and titles), a line per method
    (the style's order, aliases and line styles), one legend below the panels."""
    from matplotlib.figure import Figure

    kind = KINDS[kind_name]
    datasets = _datasets(curves, style)
    names: list[str] = []
    for dataset in datasets:
        names += [m for m in curves[dataset] if m not in names]
    methods = _order(names, style, curves)
    styles = line_styles(methods, style)
    figure = Figure(figsize=figure_inches(len(datasets), style), dpi=style.dpi,
                    layout="constrained")
    columns = min(style.columns, len(datasets))
    panels = figure.subplots(math.ceil(len(datasets) / columns), columns, squeeze=False).ravel()
    settings = style.axes.get(kind_name, {})
    handles: dict[str, Any] = {}
    for axes, (dataset, title) in zip(panels, datasets.items(), strict=False):
        for method in methods:
            line = points(kind, curves[dataset].get(method, {}))
            if line is not None:
                handles.setdefault(method, axes.plot(*line, **styles[method])[0])
        axes.set(title=title, xlabel=settings.get("xlabel", kind.x_label),
                 ylabel=settings.get("ylabel", kind.y_label),
                 xlim=settings.get("xlim", kind.x_range), ylim=settings.get("ylim", (0, 1.02)))
        if "xticks" in settings:
            axes.set_xticks(settings["xticks"])
        if "yticks" in settings:
            axes.set_yticks(settings["yticks"])
        axes.grid(alpha=0.3)
    for axes in panels[len(datasets):]:
        axes.set_axis_off()
    drawn = [m for m in methods if m in handles]
    if drawn:
        figure.legend([handles[m] for m in drawn], [styles[m]["label"] for m in drawn],
                      loc="outside lower center", frameon=False,
                      ncols=style.legend_columns or min(len(drawn), 4 * columns))
    return figure


LEGEND_INCHES = 0.6  # below the panels
MAX_SIDE = (1 << 16) - 1  # Agg's largest image side, in pixels


def figure_inches(panels: int, style: FigureStyle) -> tuple[float, float]:
    """The figure's width and height: ``columns`` panels a row, the legend below."""
    columns = min(style.columns, panels)
    width, height = style.panel_size
    return width * columns, height * math.ceil(panels / columns) + LEGEND_INCHES


def check_canvas(panels: int, style: FigureStyle) -> None:
    """Before anything is drawn: the PNG's pixels (panels x panel size x dpi^2) fit Agg's side
    limit and ``SODKIT_MAX_PIXELS``; each setting in range is not enough (``dpi: 1200`` with
    ``panel_size: [30, 30]`` asked for 1.3 gigapixels and ended in ``std::bad_alloc``)."""
    from ..limits import MAX_PIXELS_VARIABLE, max_pixels

    if "png" not in style.formats:
        return  # PDF and SVG are vector: no canvas of pixels
    width, height = figure_inches(panels, style)
    pixels, limit = width * height * style.dpi ** 2, max_pixels()
    if pixels <= limit and max(width, height) * style.dpi <= MAX_SIDE:
        return
    fits = int(min(MAX_SIDE / max(width, height), math.sqrt(limit / (width * height))))
    raise UserError(f"--figure-style: a figure of {panels} panel(s) of {style.panel_size[0]:g} "
                    f"x {style.panel_size[1]:g} in at dpi {style.dpi} is "
                    f"{round(width * style.dpi)} x {round(height * style.dpi)} pixels, more "
                    f"than a PNG may have here ({MAX_SIDE} a side, {MAX_PIXELS_VARIABLE}={limit} "
                    f"in all): lower dpi (at most {fits} for this size) or panel_size, or draw "
                    f"fewer datasets (datasets:)")


def figure_bytes(figure: Any, fmt: str) -> bytes:
    """The figure in ``fmt`` (png, pdf, svg), fonts embedded as TrueType, SVG text as text."""
    from matplotlib import rc_context

    buffer = io.BytesIO()
    with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42,
                     "svg.hashsalt": "sodkit"}):  # the same figure gives the same bytes
        figure.savefig(buffer, format=fmt, metadata={"Date": None} if fmt != "png" else None)
    return buffer.getvalue()


def render_figures(curves: Curves, kinds: tuple[str, ...], style: FigureStyle
                   ) -> dict[str, bytes]:
    """``{"<kind>.<format>": file bytes}`` for each kind and the style's formats, drawn before
    anything is written (a style that names an unknown dataset writes nothing)."""
    from matplotlib import rc_context

    if not curves:
        raise UserError("--figures: the folders hold no curves.json to draw")
    check_canvas(len(_datasets(curves, style)), style)
    files = {}
    with rc_context({"font.size": style.font_size}):
        for kind in kinds:
            figure = publication_figure(curves, kind, style)
            for fmt in style.formats:
                files[f"{kind}.{fmt}"] = figure_bytes(figure, fmt)
    return files


def write_figures(files: Mapping[str, bytes], out: Path, force: bool) -> None:
    """Each of :func:`render_figures`' files into ``out`` (a report folder)."""
    from .named_outputs import write_file

    for name, data in files.items():
        write_file(out / name, lambda p, data=data: p.write_bytes(data), force, "report",
                   "--figures")
