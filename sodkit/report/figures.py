"""Pictures of the report as ``data:`` URIs: matplotlib figures and gallery thumbnails.

Everything is embedded in the page, so ``report.html`` is one file that opens anywhere, offline.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .tables import plot_label

THUMB_HEIGHT = 120  # gallery row height in pixels


def _figure(width: float, height: float, margins: dict[str, float]) -> Any:
    """A bare matplotlib ``Figure`` (Agg, no pyplot: no global figure state to close) of
    ``width`` x ``height`` inches at the saved 100 dpi, with fixed ``margins``
    (``subplots_adjust``'s): ``tight_layout`` cost a full extra draw of each figure (the
    training figure: 231 -> 158 ms), and these figures' texts have fixed sizes."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    figure.subplots_adjust(**margins)
    return figure


def _uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def figure_uri(figure: Any) -> str:
    """The figure as a PNG ``data:`` URI, at its own size and resolution."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return _uri(buffer.getvalue(), "image/png")


Line = tuple[str, list[tuple[int, float]]]  # label, (step, value) points


def training_lines(series: Mapping[str, list[tuple[int, float]]]
                   ) -> tuple[list[Line], list[Line]]:
    """The loss and learning-rate lines to draw: one per loss term, and one per distinct LR
    curve, its label naming every parameter group that has it and saying that they are
    identical (#28: four groups of one LR drew one visible line under a legend of four)."""
    losses = [(tag.split("/", 1)[1], list(points)) for tag, points in series.items()
              if tag.startswith("loss/")]
    curves: dict[tuple[tuple[int, float], ...], list[str]] = {}
    for tag, points in series.items():
        if not tag.startswith("loss/"):
            curves.setdefault(tuple(points), []).append(tag.split("/", 1)[1])
    rates = []
    for points, names in curves.items():
        label = names[0] if len(names) == 1 else (
            f"{', '.join(names)} (identical)" if len(names) < 5 else
            f"{len(names)} groups (identical)")
        rates.append((label, list(points)))
    return losses, rates


def _draw(axes: Any, label: str, points: list[tuple[int, float]]) -> None:
    """A line; a single point (a run that logged one step) as a dot with its value written
    beside it, instead of an invisible line on empty axes."""
    steps, values = zip(*points, strict=True) if points else ((), ())
    if len(points) == 1:
        axes.plot(steps, values, "o", label=plot_label(label))
        axes.annotate(f"{values[0]:.4g}", (steps[0], values[0]), textcoords="offset points",
                      xytext=(6, 6), fontsize=8)
    else:
        axes.plot(steps, values, label=plot_label(label), linewidth=1.2)


def training_uri(series: Mapping[str, list[tuple[int, float]]]) -> str | None:
    """Loss terms and learning rates against the optimizer step, side by side."""
    if not series:
        return None
    return figure_uri(training_figure(series))


def training_figure(series: Mapping[str, list[tuple[int, float]]]) -> Any:
    """The figure of :func:`training_uri` (matplotlib, open)."""
    figure = _figure(10, 3.6, {"left": 0.075, "right": 0.985, "bottom": 0.14, "top": 0.9,
                               "wspace": 0.24})
    loss_ax, lr_ax = figure.subplots(1, 2)
    losses, rates = training_lines(series)
    for axes, lines in ((loss_ax, losses), (lr_ax, rates)):
        for label, points in lines:
            _draw(axes, label, points)
    loss_ax.set(xlabel="step", ylabel="loss", title="Training loss terms")
    lr_ax.set(xlabel="step", ylabel="learning rate", title="Learning rate per group")
    for axes in (loss_ax, lr_ax):
        axes.grid(alpha=0.3)
        if axes.lines:
            axes.legend(fontsize=8)
    return figure


def curves_uri(curves: Mapping[str, Mapping[str, list[float]]], title: str) -> str | None:
    """Precision-recall and F-measure-vs-threshold of every line (method or dataset)."""
    if not curves:
        return None
    figure = _figure(10, 4, {"left": 0.065, "right": 0.985, "bottom": 0.125, "top": 0.91,
                             "wspace": 0.2})
    pr_ax, fm_ax = figure.subplots(1, 2)
    thresholds = np.arange(255, -1, -1)
    for label, values in curves.items():
        if "recall_curve" in values and "precision_curve" in values:
            pr_ax.plot(values["recall_curve"], values["precision_curve"], label=plot_label(label))
        if "fm_curve" in values:
            fm_ax.plot(thresholds, values["fm_curve"], label=plot_label(label))
    pr_ax.set(xlabel="Recall", ylabel="Precision", title=f"{plot_label(title)}: precision-recall",
              xlim=(0, 1), ylim=(0, 1.02))
    fm_ax.set(xlabel="Threshold", ylabel="F-measure", title=f"{plot_label(title)}: F-measure",
              xlim=(0, 255), ylim=(0, 1.02))
    for axes in (pr_ax, fm_ax):
        axes.grid(alpha=0.3)
        if axes.lines:
            axes.legend(fontsize=8, loc="lower left")
    return figure_uri(figure)


def thumbnail_uri(path: str | Path | None, height: int = THUMB_HEIGHT) -> str | None:
    """A file's image scaled to ``height`` rows, as a PNG ``data:`` URI; None if unreadable."""
    if not path or not Path(path).is_file():
        return None
    import cv2

    from ..errors import DataError
    from ..imageio import read_image

    try:  # within the limits on file size and pixels (limits.py), upright as displayed
        image = cv2.cvtColor(read_image(path), cv2.COLOR_RGB2BGR)
    except DataError:
        return None
    rows, cols = image.shape[:2]
    width = max(1, math.ceil(cols * height / rows))
    interpolation = cv2.INTER_AREA if rows > height else cv2.INTER_LINEAR
    small = cv2.resize(image, (width, height), interpolation=interpolation)
    ok, data = cv2.imencode(".png", small)
    return _uri(data.tobytes(), "image/png") if ok else None
