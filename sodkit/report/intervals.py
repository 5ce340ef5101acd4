"""``sodkit report --ci``: the intervals and paired comparisons ``sodkit eval --ci`` saved.

The report does not recompute them: a folder keeps each image's scores
(``results_per_image.csv``) but not the per-image histograms from which maxF, maxE and the
other curve maxima are recomputed per resample, so it shows each eval output's ``ci.json``
(``sodkit/evaluation/intervals.py``), checked for its shape, for the comparison's metrics.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError
from .inputs import read_json
from .latex import Marks


def read_ci(path: Path) -> dict[str, Any]:
    """A ``ci.json``: ``intervals`` and ``comparisons`` mappings; a one-line UserError else."""
    document = read_json(path)
    if not (isinstance(document, dict) and isinstance(document.get("intervals"), dict)
            and isinstance(document.get("comparisons"), dict)):
        raise UserError(f"{path}: not the ci.json of sodkit eval --ci (no intervals); "
                        f"re-create it with sodkit eval --ci, or move it out of the folder")
    return document


def stale(ci: Mapping[str, Any], results: Mapping[str, Mapping[str, float]]) -> bool:
    """Whether a ``ci.json`` belongs to other numbers than the ``results.json`` beside it (an
    evaluation without ``--ci`` into the same folder leaves the older intervals there)."""
    for method, keys in ci["intervals"].items():
        for key, entry in keys.items() if isinstance(keys, Mapping) else ():
            value = entry.get("value") if isinstance(entry, Mapping) else None
            ours = results.get(method, {}).get(key)
            if ours is None or (value is None) != math.isnan(ours):
                return True
            if value is not None and abs(value - ours) > 1e-12:
                return True
    return False


def _cell(entry: Mapping[str, Any] | None, sign: bool = False, low: str = "low",
          value: str = "value") -> str:
    if not isinstance(entry, Mapping):
        return "<td></td>"

    def shown(number: Any) -> str:
        if not isinstance(number, (int, float)) or math.isnan(number):
            return "nan"
        return f"{number:+.4f}" if sign else f"{number:.4f}"

    text = f"{shown(entry.get(value))} [{shown(entry.get(low))}, {shown(entry.get('high'))}]"
    if sign:
        p = entry.get("p")
        text += f" p={p:.3f}" if isinstance(p, (int, float)) else ""
        text += " *" if entry.get("excludes_zero") else ""
    return f"<td>{html.escape(text)}</td>"


def ci_section(per_dataset: Mapping[str, Mapping[str, Any]], renamed: Mapping[str, str],
               metrics: Sequence[str]) -> str:
    """One table per dataset: ``value [low, high]`` per method, then the differences with the
    baseline (``*``: the interval excludes 0)."""
    parts = []
    for dataset, ci in per_dataset.items():
        head = "".join(f"<th>{html.escape(m)}</th>" for m in metrics)
        rows = [f"<tr><td>{html.escape(renamed.get(method, method))}</td>"
                + "".join(_cell(keys.get(m)) for m in metrics) + "</tr>"
                for method, keys in ci["intervals"].items()]
        baseline = ci.get("baseline")
        rows += [f"<tr><td>{html.escape(renamed.get(method, method))} - "
                 f"{html.escape(renamed.get(str(baseline), str(baseline)))}</td>"
                 + "".join(_cell(keys.get(m), sign=True, value="difference") for m in metrics)
                 + "</tr>" for method, keys in ci["comparisons"].items()]
        level = ci.get("level", 0.95)
        drawn = f"{ci.get('images')} images"
        if "groups" in ci:  # eval --groups: the groups were resampled
            drawn = f"{ci['groups']} groups ({drawn})"
        parts.append(
            f"<h3>{html.escape(dataset)}</h3><p>{level:.0%} intervals: percentile bootstrap, "
            f"{html.escape(str(ci.get('resamples')))} resamples of "
            f"{html.escape(drawn)}, seed "
            f"{html.escape(str(ci.get('seed')))}"
            + (f"; differences paired with {html.escape(str(baseline))} (* the interval "
               f"excludes 0)" if baseline else "")
            + f'.</p><div class="wide"><table class="data ci"><thead><tr><th>method</th>{head}'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")
    return "".join(parts)


def latex_marks(per_dataset: Mapping[str, Mapping[str, Any]],
                renamed: Mapping[str, str] | None = None) -> Marks:
    """``--latex-ci``: the cells whose difference with the baseline is not significant, from
    ``{dataset: ci.json}`` (every ``ci.json`` compared with one baseline).

    Raises:
        UserError: no paired comparison was saved, or the datasets have different baselines.
    """
    renamed = renamed or {}
    baselines = {ci.get("baseline") for ci in per_dataset.values()}
    if not per_dataset or None in baselines:
        raise UserError("--latex-ci marks differences with a baseline: evaluate with sodkit eval "
                        "--baseline NAME (or give report the folders of such an evaluation)")
    if len(baselines) > 1:
        raise UserError(f"--latex-ci: the intervals compare with different baselines "
                        f"({', '.join(sorted(map(str, baselines)))}); evaluate with one")
    baseline = str(baselines.pop())
    cells = {(renamed.get(method, method), dataset, metric)
             for dataset, ci in per_dataset.items()
             for method, keys in ci["comparisons"].items()
             for metric, entry in keys.items()
             if isinstance(entry, Mapping) and not entry.get("excludes_zero")}
    return Marks(renamed.get(baseline, baseline), cells)
