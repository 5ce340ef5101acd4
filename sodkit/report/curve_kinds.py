"""The curves sodkit draws: precision-recall, and F-measure, E-measure, IoU and Dice against the
threshold (#25: PySODEvalToolkit's ``--mode pr|fm|em|iou|dice``).

Each is a curve ``SODMetrics.compute()`` already returns (averaged over images, 256 thresholds,
255 first) and ``curves.json`` keeps, so drawing one costs no measuring and ``sodkit report``
can draw them later. Plain Python: ``--help`` reads :data:`KINDS` without numpy.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CurveKind:
    """One kind of curve: which ``curves.json`` entries are its y (and x) values, and how its
    axes are labelled by default."""

    name: str
    y: str
    x: str | None  # None: the threshold, 0..255
    x_label: str
    y_label: str
    title: str

    @property
    def x_range(self) -> tuple[float, float]:
        return (0.0, 1.0) if self.x is not None else (0.0, 255.0)


KINDS = {
    "pr": CurveKind("pr", "precision_curve", "recall_curve", "Recall", "Precision",
                    "Precision-recall"),
    "fm": CurveKind("fm", "fm_curve", None, "Threshold", "F-measure", "F-measure vs threshold"),
    "em": CurveKind("em", "em_curve", None, "Threshold", "E-measure", "E-measure vs threshold"),
    "iou": CurveKind("iou", "iou_curve", None, "Threshold", "IoU", "IoU vs threshold"),
    "dice": CurveKind("dice", "dice_curve", None, "Threshold", "Dice", "Dice vs threshold"),
}
DEFAULT_KINDS = ("pr", "fm")


def parse_kinds(text: str) -> tuple[str, ...]:
    """``--curves`` text (``pr,em`` or ``all``) -> kinds in :data:`KINDS` order (argparse type)."""
    asked = [part.strip().lower() for part in text.split(",") if part.strip()]
    if asked == ["all"]:
        return tuple(KINDS)
    unknown = [kind for kind in asked if kind not in KINDS]
    if unknown or not asked:
        raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(KINDS)} or all")
    return tuple(kind for kind in KINDS if kind in asked)


def points(kind: CurveKind, values: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """(x, y) arrays of ``kind`` in a label's curves, or None when they lack it."""
    import numpy as np

    if kind.y not in values or (kind.x is not None and kind.x not in values):
        return None
    y = np.asarray(values[kind.y], dtype=np.float64)
    x = np.asarray(values[kind.x], dtype=np.float64) if kind.x else np.arange(255, -1, -1)
    return (x, y) if x.shape == y.shape else None
