"""What ``sodkit eval`` writes (rank 0), through its output folder (:mod:`sodkit.outputs`): the
folder is claimed and every file it will hold is checked before any image is measured, so a
refusal (another command's folder, a file changed by hand) costs nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..outputs import OutputFolder, check_claim, claim
from ..outputs.folder import read_marker

if TYPE_CHECKING:
    from .job import Job
    from .ranks import Ranks
    from .request import EvalRequest
    from .rerun import Earlier

logger = logging.getLogger(__name__)

JOB_FILES = ("results.json", "results.md", "results.csv", "curves.json",
             "results_per_image.csv", "pr.png", "fm.png", "em.png", "iou.png",
             "dice.png", "ci.json", "ci.csv")  # in each dataset's folder (plots: as --curves asks)
TABLES = ("results.json", "results.md", "results.csv")  # the combined table of several


def output_paths(out: Path, jobs: Sequence[Job]) -> list[Path]:
    """Every file the evaluation writes (the paper tables are checked on their own)."""
    paths = [out / "evaluation.json"] + ([out / n for n in TABLES] if len(jobs) > 1 else [])
    return paths + [job.out_dir / name for job in jobs for name in JOB_FILES]


def check_collisions(request: EvalRequest, jobs: Sequence[Job], folders: list[Path]) -> None:
    """Before any work: no two of eval's outputs (``--out``'s files and folders, ``--latex``,
    ``--xlsx``) are one path, and none is an input (:mod:`sodkit.collisions`)."""
    from ..collisions import Inputs, Output, check_outputs

    out = Path(request.out)
    files = [path.relative_to(out).as_posix() for path in output_paths(out, jobs)]
    subs = sorted({job.out_dir.relative_to(out).as_posix() for job in jobs} - {"."})
    outputs = [Output("--out", out, files, subs)]
    outputs += [Output(f"--{flag}", Path(getattr(request, flag))) for flag in ("latex", "xlsx")
                if getattr(request, flag)]
    read = [Path(m) for m in request.method_files]
    read += [Path(spec.partition("=")[2] or spec) for spec in request.stem_list]
    read += [Path(request.datasets_file)] if request.datasets_file else []
    check_outputs(outputs, Inputs(folders, read))


class DeferredFolder:
    """The output folder, checked before any work and created at its first write: a bad input
    found while measuring (a crafted GT, say) leaves no folder behind."""

    def __init__(self, out: Path, force: bool, earlier: Earlier | None = None) -> None:
        self.out, self.force = out, force
        self.earlier = earlier  # the evaluation the folder held (its methods and tables)
        self._folder: OutputFolder | None = None

    @property
    def folder(self) -> OutputFolder:
        if self._folder is None:
            self._folder = claim(self.out, "eval", self.force)
        return self._folder


def claim_output(out: Path, jobs: Sequence[Job], ranks: Ranks,
                 force: bool) -> DeferredFolder | None:
    """Rank 0 checks that the output folder may be claimed and the files written; a refusal
    ends every rank. Returns the (deferred) folder on rank 0, None elsewhere."""
    from .rerun import read_earlier, warn_dropped

    error, deferred = None, None
    if ranks.is_main:
        try:
            check_claim(out, "eval", force)
            earlier = None
            if read_marker(out) is not None:  # an earlier evaluation's: its files are checked
                OutputFolder(out, "eval", force).check(output_paths(out, jobs))
                earlier = read_earlier(out)
                warn_dropped(out, earlier, jobs)
            deferred = DeferredFolder(out, force, earlier)
        except UserError as exc:
            error = exc
    ranks.settle(error)
    return deferred


def write_job(job: Job, results: dict[str, dict[str, Any]], table: dict[str, dict[str, float]],
              rows: list[dict[str, str]], deferred: DeferredFolder) -> None:
    """One dataset's tables, curves and per-image scores."""
    from ..report import write_result_files

    write_result_files(table, results, rows, job.out_dir, deferred.folder, "method",
                       kinds=job.curves)


def write_summary(jobs: Sequence[Job], tables: list[dict[str, dict[str, float]]],
                  request: EvalRequest, deferred: DeferredFolder) -> None:
    """Files about every dataset: the combined table, evaluation.json, paper tables."""
    from ..report import write_results
    from ..report.named_outputs import write_tables
    from ..report.tables import write_eval_manifest
    from .rerun import tables_after

    folder = deferred.folder

    out = Path(request.out)
    combined: dict[str, dict[str, float]] = {}
    comparison: dict[str, dict[str, dict[str, float]]] = {}
    for job, table in zip(jobs, tables, strict=True):
        combined.update({f"{job.name}/{method}": values for method, values in table.items()})
        for method, values in table.items():
            comparison.setdefault(method, {})[job.name] = values
    if len(jobs) > 1:
        write_results(combined, out, row_label="dataset/method", outputs=folder)
    marks = None
    if request.latex_ci:
        from ..report.intervals import latex_marks

        marks = latex_marks({job.name: job.ci_result for job in jobs})
    write_tables(comparison, request, "eval", marks)
    tables = tables_after(out, deferred.earlier, comparison, request)  # stale ones: a line each
    write_eval_manifest(out, {job.name: (job.out_dir, [p for files in (job.gts,
                                                                       *job.preds.values())
                                                       for p in files.values()])
                              for job in jobs}, folder, tables)
