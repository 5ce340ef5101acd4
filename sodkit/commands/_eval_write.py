"""What ``sodkit eval`` writes (rank 0), through its output folder (:mod:`sodkit.outputs`): the
folder is claimed and every file it will hold is checked before any image is measured, so a
refusal (another command's folder, a file changed by hand) costs nothing."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..outputs import OutputFolder, claim

if TYPE_CHECKING:
    from ._eval_group import EvalGroup
    from .eval import Job

logger = logging.getLogger(__name__)

JOB_FILES = ("results.json", "results.md", "results.csv", "curves.json",
             "results_per_image.csv", "pr.png", "fm.png")  # in each dataset's folder
TABLES = ("results.json", "results.md", "results.csv")  # the combined table of several


def output_paths(out: Path, jobs: Sequence[Job]) -> list[Path]:
    """Every file the evaluation writes (the paper tables are checked on their own)."""
    paths = [out / "evaluation.json"] + ([out / n for n in TABLES] if len(jobs) > 1 else [])
    return paths + [job.out_dir / name for job in jobs for name in JOB_FILES]


def claim_output(out: Path, jobs: Sequence[Job], group: EvalGroup,
                 force: bool) -> OutputFolder | None:
    """Rank 0 claims the output folder and checks the files to write; a refusal ends every
    rank. Returns the folder on rank 0, None elsewhere."""
    error, folder = None, None
    if group.is_main:
        try:
            folder = claim(out, "eval", force)
            folder.check(output_paths(out, jobs))
        except UserError as exc:
            error = exc
    group.settle(error)
    return folder


def write_job(job: Job, results: dict[str, dict[str, Any]], table: dict[str, dict[str, float]],
              rows: list[dict[str, str]], folder: OutputFolder) -> None:
    """One dataset's tables, curves and per-image scores."""
    from ..report import plot_curves, write_curves_json, write_per_image_csv, write_results

    write_results(table, job.out_dir, row_label="method", outputs=folder)
    write_curves_json(results, job.out_dir, outputs=folder)
    write_per_image_csv(rows, job.out_dir, outputs=folder)
    plot_curves(results, job.out_dir, outputs=folder)


def write_summary(jobs: Sequence[Job], tables: list[dict[str, dict[str, float]]],
                  args: argparse.Namespace, folder: OutputFolder) -> None:
    """Files about every dataset: the combined table, evaluation.json, paper tables."""
    from ..report import write_results
    from ..report.publish import write_tables

    out = Path(args.out)
    combined: dict[str, dict[str, float]] = {}
    comparison: dict[str, dict[str, dict[str, float]]] = {}
    for job, table in zip(jobs, tables, strict=True):
        combined.update({f"{job.name}/{method}": values for method, values in table.items()})
        for method, values in table.items():
            comparison.setdefault(method, {})[job.name] = values
    if len(jobs) > 1:
        write_results(combined, out, row_label="dataset/method", outputs=folder)
    datasets = {job.name: job.out_dir.relative_to(out).as_posix() if job.out_dir != out else "."
                for job in jobs}
    folder.write_text(out / "evaluation.json",
                      json.dumps({"kind": "eval", "datasets": datasets}, indent=2) + "\n")
    write_tables(comparison, args, "eval")
    logger.info("results written to %s", args.out)
