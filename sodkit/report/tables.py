"""Result files: tables (JSON, Markdown, CSV), curves (PNG plots and ``curves.json``) and
per-image scores (``results_per_image.csv``).

Used by ``sodkit eval`` (a row per method) and by a run's evaluation (a row per dataset), both
through :func:`write_result_files`. The column order puts the numbers papers report first (MAE,
S, wF, F, E), then the rest in the order they come. ``curves.json`` and
``results_per_image.csv`` hold what ``sodkit report`` draws later (curves of several runs in one
plot, best and worst images) without the metrics.

Every file goes through an output folder (:class:`sodkit.outputs.OutputFolder`): written
atomically, recorded with its hash, and replacing only a file sodkit wrote and nobody changed.
``outputs`` is the folder a command claimed (its kind, its ``--force``); by default the one
``out_dir`` lies in.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics.families import family_keys
from ..metrics.results import PER_IMAGE_KEYS
from ..outputs import OutputFolder
from .cells import inert

CURVES_SAVED = ("precision_curve", "recall_curve", "fm_curve", "em_curve", "iou_curve",
                "dice_curve")  # every curve sodkit draws (curve_kinds.KINDS)
PER_IMAGE_SCORES = PER_IMAGE_KEYS  # each image's own scores, as SODMetrics.per_image()
PER_IMAGE_FILES = ("image", "gt", "prediction")
PER_IMAGE_COLUMNS = ("dataset", "method", "stem", *PER_IMAGE_SCORES, *PER_IMAGE_FILES)
STANDARD_ORDER = ("MAE", "Smeasure", "wFmeasure", "maxFm", "meanFm", "adpFm",
                  "maxEm", "meanEm", "adpEm")


def metric_columns(results: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Columns of a table: the standard metrics present, in paper order, then the others."""
    seen: list[str] = []
    for values in results.values():
        seen += [key for key in values if key not in seen]
    return [k for k in STANDARD_ORDER if k in seen] + [k for k in seen if k not in STANDARD_ORDER]


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return "nan" if math.isnan(value) else f"{value:.4f}"


def markdown_table(
    results: Mapping[str, Mapping[str, float]],
    row_label: str = "dataset",
    columns: Sequence[str] | None = None,
) -> str:
    """A Markdown table, a row per key of ``results``, values with 4 decimals.

    Args:
        results: row -> metric -> value.
        row_label: header of the first column.
        columns: metrics to show (default: all, see :func:`metric_columns`).
    """
    columns = metric_columns(results) if columns is None else list(columns)
    lines = ["| " + " | ".join([row_label, *columns]) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(columns)) + "|"]
    for row, values in results.items():
        lines.append("| " + " | ".join([row, *(_cell(values.get(c)) for c in columns)]) + " |")
    return "\n".join(lines) + "\n"


def reading_table(results: Mapping[str, Mapping[str, float]], row_label: str,
                  all_columns: int) -> str:
    """``results.md``: the standard metrics papers report (MAE, S, wF, F and E) and the optional
    families the user asked for (``--compute``: HCE, BIoU, ...), not the 30-odd columns of the
    JSON and CSV files (#28), with a line that says where the rest are."""
    from ..metrics.families import family_keys

    chosen = set(STANDARD_ORDER) | set(family_keys())
    paper = [c for c in metric_columns(results) if c in chosen]
    table = markdown_table(results, row_label, paper or None)
    if not paper or len(paper) == all_columns:
        return table
    return (f"{table}\nThe standard metrics (and those of --compute); all {all_columns} are in "
            f"results.csv and results.json.\n")


def _folder(out_dir: str | Path, outputs: OutputFolder | None) -> OutputFolder:
    return outputs if outputs is not None else OutputFolder.at(out_dir)


def write_results(
    results: Mapping[str, Mapping[str, float]], out_dir: str | Path, row_label: str = "dataset",
    outputs: OutputFolder | None = None,
) -> None:
    """Write ``results.json`` (``{row: {metric: value}}``), ``results.md`` and ``results.csv``.

    Args:
        results: row (dataset or method) -> metric -> value; values are converted to float.
        out_dir: folder, created if needed.
        row_label: header of the first column of the tables.
        outputs: the output folder they belong to (see the module docstring).
    """
    out, folder = Path(out_dir), _folder(out_dir, outputs)
    plain = {str(row): {str(k): float(v) for k, v in values.items()} for row, values in
             results.items()}
    columns = metric_columns(plain)
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow([inert(label) for label in (row_label, *columns)])
    for row, values in plain.items():
        writer.writerow([inert(row), *(repr(values[c]) if c in values else ""
                                       for c in columns)])
    folder.check([out / "results.json", out / "results.md", out / "results.csv"])
    folder.write_text(out / "results.json", json.dumps(plain, indent=2) + "\n")
    folder.write_text(out / "results.md", reading_table(plain, row_label, len(columns)))
    folder.write_text(out / "results.csv", table.getvalue())


def write_result_files(table: Mapping[str, Mapping[str, float]],
                       curves: Mapping[str, Mapping[str, Any]], rows: Sequence[Mapping[str, str]],
                       out_dir: Path, outputs: OutputFolder, row_label: str,
                       plots: Path | None = None, kinds: Sequence[str] = ("pr", "fm")) -> None:
    """The files every evaluation writes, one place for ``sodkit eval`` (a row per method, a
    folder per dataset) and a run's evaluation in ``train`` / ``test`` (a row per dataset):
    ``results.{json,md,csv}`` of ``table``, ``curves.json`` and the ``<kind>.png`` plots (in
    ``plots``, default ``out_dir``) of ``curves``, and ``results_per_image.csv`` of ``rows``."""
    write_results(table, out_dir, row_label=row_label, outputs=outputs)
    write_curves_json(curves, out_dir, outputs=outputs)
    write_per_image_csv(rows, out_dir, outputs=outputs)
    plot_curves(curves, plots if plots is not None else out_dir, outputs=outputs, kinds=kinds)


def write_eval_manifest(out: Path, datasets: Mapping[str, tuple[Path, Sequence[Path]]],
                        outputs: OutputFolder | None = None,
                        tables: Mapping[str, Any] | None = None) -> None:
    """``evaluation.json`` of ``sodkit eval`` from ``{dataset: (its folder, the files read)}``:
    ``datasets`` maps each to its sub-folder of ``out`` ("." for ``out`` itself), ``inputs`` to
    the folders its per-image rows name (what ``sodkit report`` may show images of), ``tables``
    the paper tables written from it (``sodkit.evaluation.rerun``)."""
    from .confine import folders_of

    manifest = {"kind": "eval",
                "datasets": {name: folder.relative_to(out).as_posix() if folder != out else "."
                             for name, (folder, _) in datasets.items()},
                "inputs": {name: folders_of(files) for name, (_, files) in datasets.items()},
                "tables": dict(tables or {})}
    _folder(out, outputs).write_text(out / "evaluation.json",
                                     json.dumps(manifest, indent=2) + "\n")


def plot_label(name: str) -> str:
    """``name`` as matplotlib draws it literally: an unescaped ``$`` would start mathtext (a
    dataset called ``a$b$`` is drawn as a formula, and ``a$`` fails the whole figure)."""
    return str(name).replace("$", r"\$")


def plot_curves(curves: Mapping[str, Mapping[str, Any]], out_dir: str | Path,
                outputs: OutputFolder | None = None,
                kinds: Sequence[str] = ("pr", "fm")) -> None:
    """Write ``<kind>.png`` for each of ``kinds``: ``pr.png`` (precision vs recall), ``fm.png``
    (F-measure vs threshold), and on request ``em.png``, ``iou.png``, ``dice.png``.

    Args:
        curves: line label (method or dataset) -> a mapping with ``precision_curve``,
            ``recall_curve``, ``fm_curve``, ... (256 values, threshold 255 first, as
            ``SODMetrics.compute()`` returns them; other keys are ignored).
        out_dir: folder, created if needed.
        outputs: the output folder they belong to (see the module docstring).
        kinds: names of :data:`sodkit.report.curve_kinds.KINDS`.
    """
    out, folder = Path(out_dir), _folder(out_dir, outputs)
    folder.check([out / f"{name}.png" for name in kinds])
    for name in kinds:
        image = io.BytesIO()
        curve_figure(curves, name).savefig(image, format="png")
        folder.write_bytes(out / f"{name}.png", image.getvalue())


def curve_figure(curves: Mapping[str, Mapping[str, Any]], name: str) -> Any:
    """The matplotlib ``Figure`` of one kind of curve (``pr``, ``fm``, ``em``, ``iou``,
    ``dice``), a line per label that has it (what :func:`plot_curves` saves)."""
    # A bare Figure renders with Agg and needs no pyplot: no global figure state to close,
    # and 0.1-0.2 s less to import (sodkit eval's fixed cost: evaluation.run._preload_plotting).
    from matplotlib.figure import Figure

    from .curve_kinds import KINDS, points

    kind = KINDS[name]
    # Drawn at the saved resolution with fixed margins: tight_layout and a DPI change at
    # savefig each cost a full extra draw (0.19 -> 0.12 s per figure).
    figure = Figure(figsize=(5, 4.5), dpi=120)
    axes = figure.subplots()
    for label, values in curves.items():
        line = points(kind, values)
        if line is not None:
            axes.plot(*line, label=plot_label(label))
    axes.set(xlabel=kind.x_label, ylabel=kind.y_label, title=kind.title, ylim=(0, 1.02))
    axes.set_xlim(*kind.x_range)
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(loc="lower left" if name == "pr" else "lower center", fontsize=8)
    figure.subplots_adjust(left=0.13, right=0.96, bottom=0.11, top=0.93)
    return figure


def write_curves_json(curves: Mapping[str, Mapping[str, Any]], out_dir: str | Path,
                      outputs: OutputFolder | None = None) -> Path:
    """``curves.json``: ``{label: {precision_curve, recall_curve, fm_curve, em_curve,
    iou_curve, dice_curve}}``.

    Each curve is a list of 256 floats, threshold 255 first (as ``SODMetrics.compute()``);
    labels without curves are skipped. Floats keep full precision (``json`` writes ``repr``).
    """
    plain = {str(label): {key: [float(v) for v in np.asarray(values[key])]
                          for key in CURVES_SAVED if key in values}
             for label, values in curves.items()}
    path = Path(out_dir) / "curves.json"
    _folder(out_dir, outputs).write_text(path, json.dumps({k: v for k, v in plain.items() if v})
                                         + "\n")
    return path


def per_image_rows(
    dataset: str,
    method: str,
    scores: Mapping[str, np.ndarray],
    files: Sequence[tuple[str, str, str, str]],
) -> list[dict[str, str]]:
    """Rows of ``results_per_image.csv`` for one dataset and method.

    Args:
        dataset, method: the row's labels (``method`` is empty for a training run's own model).
        scores: ``SODMetrics.per_image()`` (arrays in dataset-index order, with ``index``).
        files: per dataset index, ``(stem, image, gt, prediction)`` paths as text ('' if none).
    """
    keys = [*PER_IMAGE_SCORES, *(key for key in family_keys() if key in scores)]
    rows = []
    for row, index in enumerate(np.asarray(scores["index"]).tolist()):
        stem, image, gt, prediction = files[index]
        values = {key: repr(float(scores[key][row])) for key in keys}
        rows.append({"dataset": dataset, "method": method, "stem": stem, **values,
                     "image": image, "gt": gt, "prediction": prediction})
    return rows


def write_per_image_csv(rows: Sequence[Mapping[str, str]], out_dir: str | Path,
                        outputs: OutputFolder | None = None) -> Path:
    """``results_per_image.csv`` (:data:`PER_IMAGE_COLUMNS`, and the computed families' keys
    before the file columns; scores at full precision)."""
    path = Path(out_dir) / "results_per_image.csv"
    table = io.StringIO(newline="")
    families = [key for key in family_keys() if any(key in row for row in rows)]
    writer = csv.DictWriter(table, fieldnames=(*PER_IMAGE_COLUMNS[:-len(PER_IMAGE_FILES)],
                                               *families, *PER_IMAGE_FILES))
    writer.writeheader()
    text = ("dataset", "method", "stem", *PER_IMAGE_FILES)
    writer.writerows({**row, **{key: inert(row[key]) for key in text}} for row in rows)
    _folder(out_dir, outputs).write_text(path, table.getvalue())
    return path


PER_IMAGE_NEEDED = ("dataset", "method", "stem", "MAE", "Smeasure", *PER_IMAGE_FILES)


def read_per_image_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a ``results_per_image.csv``, scores as floats and text cells as written before
    :func:`~sodkit.report.cells.inert` (missing file -> []).

    Raises:
        UserError: the file lacks a column the report needs, a score is not a number, or a
            line is not CSV (a field over csv's 128 KB limit, a NUL byte), naming the line.
    """
    from ..errors import UserError
    from ..limits import check_file_size
    from .cells import restore

    path = Path(path)
    if not path.is_file():
        return []
    check_file_size(path, "result file")
    rows = []
    with open(path, newline="", encoding="utf-8", errors="replace") as handle:
        reader = csv.DictReader(handle)
        try:
            missing = [c for c in PER_IMAGE_NEEDED if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(f"{path}: no column {', '.join(missing)}; {_NOT_OURS}")
            for row in reader:
                rows.append(_per_image_row(row, path, reader.line_num))
        except csv.Error as exc:
            raise UserError(f"{path}: line {reader.line_num + 1}: {exc}; {_NOT_OURS}") from None
    for row in rows:
        for key in ("dataset", "method", "stem", *PER_IMAGE_FILES):
            row[key] = restore(row[key] or "")
    return rows


_NOT_OURS = ("it is damaged or was not written by sodkit; move it out of the folder (or "
             "re-create it with sodkit test / eval) and run again")


def _per_image_row(row: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    from ..errors import UserError

    for key in (*PER_IMAGE_SCORES, *(key for key in family_keys() if key in row)):
        text = row.get(key)
        try:
            row[key] = float(text) if text not in (None, "") else math.nan
        except ValueError:
            raise UserError(f"{path}: line {line}: {key} {text[:40]!r} is not a number; "
                            f"{_NOT_OURS}") from None
    return row
