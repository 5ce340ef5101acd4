"""``sodkit eval --ci`` and ``--baseline NAME``: a 95% interval per dataset, method and metric,
and each method's paired comparison with the baseline (``sodkit.metrics.bootstrap``), written as
``ci.json`` and ``ci.csv`` beside each dataset's ``results.json`` and printed under its table.
With ``--groups`` the groups (videos, co-salient groups) are resampled, as the dataset's numbers
are averages over groups.

The bootstrap runs on rank 0 after the merge, from the same per-image records as the results, so
the intervals belong to exactly the numbers printed; the seed fixes the draws.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from ..metrics import SODMetrics
    from ..outputs import OutputFolder
    from .job import CiOptions, Job
    from .request import EvalRequest

logger = logging.getLogger(__name__)

FILES = ("ci.json", "ci.csv")
FEW_SAMPLES = 30  # below this many images (groups) the intervals get a warning
CSV_COLUMNS = ("method", "metric", "value", "low", "high", "baseline", "difference",
               "difference_low", "difference_high", "p", "excludes_zero")


def options(request: EvalRequest, methods: Sequence[str]) -> CiOptions | None:
    """The options, checked before any image is read; None without --ci / --baseline."""
    if request.latex_ci and not (request.latex and request.baseline):
        raise UserError("--latex-ci marks the LaTeX table's values that do not differ "
                        "significantly from a baseline: add --latex FILE.tex and --baseline NAME")
    if not (request.ci or request.baseline):
        return None
    if request.baseline is not None and request.baseline not in methods:
        raise UserError(f"--baseline {request.baseline}: no method of that name; the methods are "
                        f"{', '.join(methods)}")
    from .job import CiOptions

    return CiOptions(request.ci_resamples, request.ci_seed, request.baseline)


def check_resampled(job: Job, chosen: CiOptions) -> None:
    """Before any image is measured: the bootstrap resamples images every method has (its
    comparisons are paired), so with ``--allow-missing`` a method lacking some is refused;
    enough images (groups) to resample (:data:`~sodkit.metrics.bootstrap.MIN_SAMPLES`, a
    warning below :data:`FEW_SAMPLES`); and the resampled values fit their memory bound."""
    from ..metrics.bootstrap import MAX_KEPT_BYTES, MIN_SAMPLES, kept_bytes, key_count
    from .groups import SEPARATOR

    total = len(job.gts)
    for method, files in job.preds.items():
        if len(files) < total:
            raise UserError(f"--ci resamples the images every method has; method {method!r} "
                            f"lacks {total - len(files)} of {total} in dataset {job.name} "
                            f"(--allow-missing): leave out --ci, that method, or those images "
                            f"(--list)")
    what = "groups" if job.groups else "images"
    samples = len({s.split(SEPARATOR, 1)[0] for s in job.gts}) if job.groups else total
    if samples < MIN_SAMPLES:
        raise UserError(f"--ci: dataset {job.name} has {samples} {what}; a bootstrap needs at "
                        f"least {MIN_SAMPLES} (resamples of a few {what} are nearly all alike: "
                        f"the intervals come out too narrow, zero-width for one); leave out "
                        f"--ci or evaluate more {what}")
    if samples < FEW_SAMPLES:
        logger.warning("--ci: dataset %s has %d %s: its 95%% intervals are approximate (a "
                       "bootstrap of 10-30 covers the truth 85-93%% of the time, not 95%%)",
                       job.name, samples, what)
    keys, methods = key_count(job.families), len(job.preds)
    need = kept_bytes(chosen.resamples, methods, keys)  # --ci-resamples' bound keeps it in
    if need > MAX_KEPT_BYTES:  # (1e6 x 2 x 47 keys: 752 MB); checked should either grow
        raise UserError(f"--ci-resamples {chosen.resamples} x {keys} metrics would hold "
                        f"{need / 2**30:.1f} GiB of resampled values (at most "
                        f"{MAX_KEPT_BYTES >> 30} GiB): lower --ci-resamples to "
                        f"{MAX_KEPT_BYTES // kept_bytes(1, methods, keys)} or less")


def write_ci(out_dir: Path, metrics: dict[str, SODMetrics], chosen: CiOptions,
             folder: OutputFolder, shown: Sequence[str],
             grouped: tuple[list[str], dict[str, dict[str, Any]]] | None = None,
             dataset: str = "") -> tuple[dict[str, Any], str]:
    """Bootstrap one dataset's methods, write ``ci.json`` / ``ci.csv``; the result and the text
    to print. ``grouped`` (``--groups``): the dataset's sorted ``group/stem`` keys and each
    method's numbers (averages over groups); the groups are resampled then."""
    import numpy as np

    from ..metrics.bootstrap import bootstrap
    from ..progress import Progress
    from .groups import SEPARATOR

    records = {m: metric.records() for m, metric in metrics.items()}
    groups, points = None, None
    if grouped is not None:
        stems, points = grouped
        labels = np.array([stem.split(SEPARATOR, 1)[0] for stem in stems])
        groups = labels[next(iter(records.values())).index]
    with Progress(chosen.resamples * len(records), f"{dataset}: bootstrap",
                  "resamples") as bar:
        result = bootstrap(records, chosen.resamples, chosen.seed, baseline=chosen.baseline,
                           groups=groups, points=points, done=bar.update)
    folder.write_text(out_dir / "ci.json", json.dumps(result, indent=1) + "\n")
    folder.write_text(out_dir / "ci.csv", _csv(result))
    return result, _printed(result, shown)


def _csv(result: dict[str, Any]) -> str:
    text = io.StringIO()
    writer = csv.DictWriter(text, CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    baseline = result["baseline"]
    for method, keys in result["intervals"].items():
        compared = result["comparisons"].get(method, {})
        for key, interval in keys.items():
            row = {"method": method, "metric": key, **interval}
            if key in compared:
                diff = compared[key]
                row.update(baseline=baseline, difference=diff["difference"],
                           difference_low=diff["low"], difference_high=diff["high"],
                           p=diff["p"], excludes_zero=diff["excludes_zero"])
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return text.getvalue()


def _number(value: float | None, sign: bool = False) -> str:
    if value is None or math.isnan(value):
        return "nan"
    return f"{value:+.4f}" if sign else f"{value:.4f}"


def _table(rows: dict[str, list[str]], label: str, shown: Sequence[str]) -> str:
    lines = ["| " + " | ".join([label, *shown]) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(shown)) + "|"]
    lines += ["| " + " | ".join([row, *cells]) + " |" for row, cells in rows.items()]
    return "\n".join(lines) + "\n"


def _printed(result: dict[str, Any], shown: Sequence[str]) -> str:
    """The intervals (``value [low, high]``) and, with a baseline, the differences (``*``: the
    interval excludes 0)."""
    level = f"{result['level']:.0%}"
    drawn = (f"{result['groups']} groups ({result['images']} images)" if "groups" in result
             else f"{result['images']} images")
    head = (f"{level} intervals: percentile bootstrap, {result['resamples']} resamples of "
            f"{drawn}, seed {result['seed']}")
    rows = {method: [f"{_number(keys[k]['value'])} [{_number(keys[k]['low'])}, "
                     f"{_number(keys[k]['high'])}]" for k in shown]
            for method, keys in result["intervals"].items()}
    text = f"{head}\n\n{_table(rows, 'method', shown)}"
    if result["baseline"] is None:
        return text
    rows = {f"{method} - {result['baseline']}": [
        f"{_number(d['difference'], True)} [{_number(d['low'], True)}, "
        f"{_number(d['high'], True)}] p={_number(d['p'])}{' *' if d['excludes_zero'] else ''}"
        for d in (keys[k] for k in shown)] for method, keys in result["comparisons"].items()}
    return (f"{text}\npaired with the baseline {result['baseline']} (same resampled images; "
            f"* the {level} interval of the difference excludes 0)\n\n"
            f"{_table(rows, 'difference', shown)}")
