"""A run's evaluation (``train``, ``test``) and the files it leaves in the run folder.

:class:`EvalResult` is what the engine's evaluation gives (``sodkit.engine.evaluator``): the
merged metrics, the per-image rows, the sample tiles, the input folders. :func:`write_eval_outputs`
writes them: the result files every evaluation writes (:func:`~.tables.write_result_files`,
shared with ``sodkit eval``), ``datasets.json`` and ``samples.png``. The run's ``report.html`` is
the command's to write, after the engine (:func:`sodkit.report.html.write_run_report`).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..metrics import scalar_metrics
from ..outputs import OutputFolder

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

EVAL_FILES = ("results.json", "results.md", "results.csv", "results_per_image.csv",
              "datasets.json", "curves.json", "curves/pr.png", "curves/fm.png", "samples.png",
              "report.html")


@dataclass
class EvalResult:
    """Rank 0 holds the merged metrics; other ranks hold empty dicts."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset -> compute()
    samples: list[list[np.ndarray]] = field(default_factory=list)  # rows of image | GT | pred
    sample_names: list[tuple[str, str]] = field(default_factory=list)  # (dataset, stem) a row
    per_image: list[dict[str, str]] = field(default_factory=list)  # results_per_image.csv rows
    folders: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # datasets.json

    def scalars(self) -> dict[str, dict[str, float]]:
        return {name: scalar_metrics(result) for name, result in self.metrics.items()}


def samples_image(result: EvalResult) -> tuple[np.ndarray, dict[str, str]] | None:
    """``samples.png``: image | GT | prediction under column titles, each row with its name,
    MAE and S-measure (from the per-image scores), and the same as the PNG's text."""
    from ..visualize import SAMPLE_COLUMNS, labelled_grid

    if not result.samples:
        return None
    scores = {(row["dataset"], row["stem"]): row for row in result.per_image}
    labels, lines = [], []
    for dataset, stem in result.sample_names:
        row = scores.get((dataset, stem), {})
        mae, s = (float(row[k]) if k in row else math.nan for k in ("MAE", "Smeasure"))
        labels.append([stem[:24], f"MAE {mae:.4f}", f"S {s:.4f}"])
        lines.append(f"{dataset}/{stem}: MAE {mae:.4f}, Smeasure {s:.4f}")
    grid = labelled_grid(result.samples, SAMPLE_COLUMNS, labels)
    return grid, {"Columns": " | ".join(SAMPLE_COLUMNS), "Rows": "\n".join(lines)}


def output_folder(run_dir: Path | OutputFolder) -> tuple[OutputFolder, Path]:
    """The output folder of ``run_dir`` (a folder, or the output folder a command claimed), and
    its path."""
    if isinstance(run_dir, OutputFolder):
        return run_dir, run_dir.root
    return OutputFolder.at(run_dir), Path(run_dir)


def write_eval_outputs(result: EvalResult, run_dir: Path | OutputFolder) -> None:
    """results.{json,md,csv}, results_per_image.csv, datasets.json, curves.json,
    curves/{pr,fm}.png and samples.png in the run folder (rank 0); report.html is the
    command's (training writes it after its final save, so that it lists the final
    checkpoints). ``run_dir``: the folder, or the output folder a command claimed (its rules
    apply: see :mod:`sodkit.outputs`)."""
    from ..visualize import encode_rgb, png_with_text
    from .tables import write_result_files

    outputs, run_dir = output_folder(run_dir)
    scalars = result.scalars()
    write_result_files(scalars, result.metrics, result.per_image, run_dir, outputs, "dataset",
                       plots=run_dir / "curves")
    outputs.write_text(run_dir / "datasets.json", json.dumps(result.folders, indent=2) + "\n")
    samples = samples_image(result)
    if samples is not None:
        outputs.write_bytes(run_dir / "samples.png", png_with_text(encode_rgb(samples[0]),
                                                                   samples[1]))
    from ..metrics.keys import summary_line

    for name, values in scalars.items():
        logger.info("%s: %s", name, summary_line(values))
