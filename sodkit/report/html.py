"""``report.html``: one self-contained page per run, or a comparison of several.

No framework and no network: the figures and thumbnails are ``data:`` URIs, the style is a short
``<style>`` block, and sorting a table by a column is a dozen lines of plain JavaScript. One run
gives its checkpoint, results per dataset, training curves, PR / F curves, best and worst images
by MAE and its resolved config; several runs (or ``sodkit eval`` outputs) give a comparison table
(best three per column marked, the metric's direction known), the curves of every method per
dataset, and each run's own details below.
"""

from __future__ import annotations

import html
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..text import noun_for, plural
from ..version import __version__
from .confine import Reach
from .figures import curves_uri, thumbnail_uri, training_uri
from .ranking import column_ranks, lower_is_better
from .sources import Source, load_sources
from .tables import STANDARD_ORDER

if TYPE_CHECKING:
    from ..outputs import OutputFolder

logger = logging.getLogger(__name__)

GALLERY = 4  # best and worst images shown per dataset and method
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{padding:.25em .6em;text-align:right}
th{background:#f0f0f0;cursor:default}thead th[data-col]{cursor:pointer}
td:first-child,th:first-child{text-align:left}tbody tr:nth-child(odd){background:#fafafa}
table.data{border-top:2px solid #444;border-bottom:2px solid #444}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
.rank1{font-weight:bold}.rank2{text-decoration:underline}.rank3{font-style:italic}
figure{display:inline-block;margin:.3em;vertical-align:top}figure img{margin-right:2px}
figcaption{font-size:.8em}.missing{display:inline-block;padding:2em 1em;background:#eee}
.wide{overflow-x:auto}pre{background:#f6f6f6;padding:1em;overflow:auto;max-height:30em}img.plot{max-width:100%}
"""
_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[table.tHead.rows.length - 1].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute("data-value");
        var y = b.cells[col].getAttribute("data-value");
        var nx = parseFloat(x), ny = parseFloat(y);
        if (isNaN(nx) || isNaN(ny)) return dir * String(x).localeCompare(String(y));
        return dir * (nx - ny);
      });
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _number(value: float | None, rank: int | None = None) -> str:
    if value is None:
        return '<td data-value=""></td>'
    shown = "nan" if math.isnan(value) else f"{value:.4f}"
    mark = f' class="rank{rank}"' if rank else ""
    return f'<td data-value="{value!r}"{mark}>{shown}</td>'


def _metric_head(metric: str, col: int) -> str:
    arrow = "&darr;" if lower_is_better(metric) else "&uarr;"
    return f'<th data-col="{col}" data-metric="{_e(metric)}">{_e(metric)} {arrow}</th>'


def _columns(results: Mapping[str, Mapping[str, float]]) -> list[str]:
    present = {k for values in results.values() for k in values}
    return [k for k in STANDARD_ORDER if k in present]


def results_table(source: Source) -> str:
    """One run's results: a row per dataset, a column per standard metric (sortable)."""
    return _datasets_table(source.results[next(iter(source.results))], "results")


def _datasets_table(per_dataset: Mapping[str, Mapping[str, float]], table_id: str) -> str:
    columns = _columns(per_dataset)
    head = "".join(_metric_head(m, i + 1) for i, m in enumerate(columns))
    rows = "".join(
        f'<tr data-dataset="{_e(d)}"><td data-value="{_e(d)}">{_e(d)}</td>'
        + "".join(_number(values.get(m)) for m in columns) + "</tr>"
        for d, values in per_dataset.items())
    return (f'<table id="{table_id}" class="data sortable"><thead><tr><th data-col="0">dataset'
            f"</th>{head}</tr></thead><tbody>{rows}</tbody></table>")


def comparison_table(results: Mapping[str, Mapping[str, Mapping[str, float]]],
                     datasets: Sequence[str], metrics: Sequence[str]) -> str:
    """A row per method, a column group per dataset; the best three of each column marked."""
    ranked = column_ranks(results, datasets, metrics)
    groups = "".join(f'<th colspan="{len(metrics)}">{_e(d)}</th>' for d in datasets)
    heads = "".join(_metric_head(m, 1 + i * len(metrics) + j)
                    for i, _ in enumerate(datasets) for j, m in enumerate(metrics))
    rows = "".join(
        f'<tr data-method="{_e(method)}"><td data-value="{_e(method)}">{_e(method)}</td>'
        + "".join(_number(per.get(d, {}).get(m), ranked.get((method, d, m)))
                  for d in datasets for m in metrics) + "</tr>"
        for method, per in results.items())
    return (f'<div class="wide"><table id="comparison" class="data sortable"><thead><tr><th>'
            f'</th>{groups}</tr><tr><th data-col="0">method</th>{heads}</tr></thead><tbody>{rows}'
            "</tbody></table></div>"
            '<p>Best three per column: <span class="rank1">first in bold</span>, '
            '<span class="rank2">second underlined</span>, <span class="rank3">third in '
            'italic</span>, as in the LaTeX table (MAE: lower is better; the others: higher); '
            "colours on this page tell the methods apart in the plots. Click a column to "
            "sort.</p>")


def _img(uri: str | None, alt: str, css: str = "") -> str:
    if uri is None:
        return f'<span class="missing">no {_e(alt)}</span>'
    return f'<img src="{uri}" alt="{_e(alt)}"{css}>'


def _tile(row: Mapping[str, Any], reach: Reach) -> str:
    images = "".join(_img(thumbnail_uri(reach.image(row[key])), key)
                     for key in ("image", "gt", "prediction"))
    return (f"<figure>{images}<figcaption>{_e(row['stem'])}: MAE {row['MAE']:.4f}, "
            f"S {row['Smeasure']:.3f}</figcaption></figure>")


def gallery(source: Source, count: int = GALLERY) -> str:
    """Best and worst images by per-image MAE, per dataset and method (image | GT | prediction)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in source.per_image:
        if not math.isnan(row["MAE"]):
            groups.setdefault((row["dataset"], row["method"]), []).append(row)
    parts = []
    for (dataset, method), rows in groups.items():
        rows = sorted(rows, key=lambda r: r["MAE"])
        best, worst = rows[:count], rows[max(count, len(rows) - count):][::-1]
        label = dataset if len(source.results) == 1 else f"{dataset}, {method}"
        parts.append(f"<h3>{_e(label)}: best {len(best)} by MAE</h3>"
                     + "".join(_tile(r, source.reach) for r in best))
        if worst:
            parts.append(f"<h3>{_e(label)}: worst {len(worst)} by MAE</h3>"
                         + "".join(_tile(r, source.reach) for r in worst))
    if not parts:
        return "<p>No per-image scores (results_per_image.csv) in this folder.</p>"
    return "<p>Each: image | GT | prediction.</p>" + "".join(parts)


def checkpoints_table(source: Source) -> str:
    if not source.checkpoints:
        return "<p>No checkpoints in this folder.</p>"
    rows = "".join(
        f"<tr><td>{_e(c['file'])}</td><td>{_e(c['epoch'])}</td><td>{_e(c['step'])}</td>"
        f"<td>{_e(_best(c['best']))}</td></tr>" for c in source.checkpoints)
    return ('<table id="checkpoints" class="data"><thead><tr><th>checkpoint</th><th>epoch</th>'
            f"<th>step</th><th>best so far</th></tr></thead><tbody>{rows}</tbody></table>")


def start_details(source: Source, h: str) -> list[str]:
    """Where a fine-tuning run started: the ``model.init_from`` record of its checkpoints and
    the starting model's numbers (``eval.at_start``)."""
    from .training import describe_init

    parts = []
    init = next((c["init"] for c in source.checkpoints if c.get("init")), None)
    if init is not None:
        parts.append(f"<{h}>Initialised from (model.init_from)</{h}>"
                     f"<p>{_e(describe_init(init))}</p>")
    if source.start:
        parts.append(f"<{h}>The starting model (epoch 0, eval.at_start)</{h}>"
                     + _datasets_table(source.start, "results-start"))
    return parts


def _best(best: Mapping[str, Any] | None) -> str:
    if not best:
        return ""
    value = best.get("value")
    shown = f"{value:.4f}" if isinstance(value, float) else value
    return f"{best.get('metric')} {shown} at epoch {best.get('epoch')}"


def _plot(uri: str | None, alt: str, missing: str) -> str:
    return f'<img class="plot" src="{uri}" alt="{_e(alt)}">' if uri else f"<p>{_e(missing)}</p>"


def run_details(source: Source, level: int = 2) -> str:
    """Checkpoint, training curves, gallery and config of one source."""
    h = f"h{level}"
    parts = [f"<{h}>Checkpoints</{h}>{checkpoints_table(source)}"] if source.kind == "run" else []
    parts += start_details(source, h)
    if source.kind == "run":
        parts.append(f"<{h}>Training</{h}>" + _plot(
            training_uri(source.training), "training curves",
            "No training curves (no TensorBoard events or train.log in this folder)."))
    parts.append(f"<{h}>Best and worst images</{h}>{gallery(source)}")
    if source.config:
        parts.append(f"<{h}>Resolved config</{h}><pre>{_e(source.config)}</pre>")
    return "".join(parts)


def _single(source: Source) -> str:
    curves = {d: c for d, per in source.curves.items() for c in per.values()}
    return (f"<h2>Results</h2>{results_table(source)}"
            f"<h2>PR and F-measure curves</h2>"
            + _plot(curves_uri(curves, source.label), "curves", "No curves.json in this folder.")
            + run_details(source))


def _several(sources: Sequence[Source], metrics: Sequence[str], ci: bool = False) -> str:
    results: dict[str, dict[str, dict[str, float]]] = {}
    curves: dict[str, dict[str, Any]] = {}
    for source in sources:
        results.update(source.results)
        for dataset, per_method in source.curves.items():
            curves.setdefault(dataset, {}).update(per_method)
    datasets: list[str] = []
    for source in sources:
        datasets += [d for d in source.datasets if d not in datasets]
    present = {m for per in results.values() for v in per.values() for m in v}
    shown = [m for m in metrics if m in present]
    parts = [f"<h2>Comparison</h2>{comparison_table(results, datasets, shown)}"]
    if ci:
        from .intervals import ci_section

        parts.append("<h2>Confidence intervals</h2>" + "".join(
            ci_section(s.ci, s.renamed, shown) for s in sources))
    parts.append("<h2>PR and F-measure curves</h2>")
    parts += [_plot(curves_uri(curves[d], d), f"curves {d}", f"{d}: no curves.json")
              for d in datasets if d in curves]
    for source in sources:
        parts.append(f"<details><summary>{_e(source.label)} ({_e(source.folder)})</summary>"
                     f"{run_details(source, level=3)}</details>")
    return "".join(parts)


def _listed(items: Sequence[str], count: int = 10) -> str:
    more = f" and {len(items) - count} more" if len(items) > count else ""
    return ", ".join(f"<code>{_e(item)}</code>" for item in items[:count]) + more


def notes(sources: Sequence[Source]) -> str:
    """What the page read from outside the folders, what it refused to read, and the methods
    it renamed; each folder's refusals are also one warning line."""
    parts = []
    for source in sources:
        outside = source.reach.outside_folders()
        if outside:
            parts.append(f"<li>Images of {_e(source.folder)} were read from the input folders "
                         f"its evaluation recorded: {_listed(outside)}.</li>")
        skipped = list(dict.fromkeys(source.reach.skipped))
        if skipped:
            parts.append(f"<li>{plural(len(skipped), 'file')} named in {_e(source.folder)} "
                         f"{noun_for(len(skipped), 'was')} not read: "
                         f"they lie outside it and outside the input folders its evaluation "
                         f"recorded: {_listed(skipped)}.</li>")
        source.reach.warn()
        if source.renamed:
            shown = ", ".join(f"{_e(old)} as <code>{_e(new)}</code>"
                              for old, new in source.renamed.items())
            parts.append(f"<li>Methods of {_e(source.folder)} that another folder holds too are "
                         f"shown as name@folder: {shown}.</li>")
    return f'<ul id="notes">{"".join(parts)}</ul>' if parts else ""


def build_report(sources: Sequence[Source], metrics: Sequence[str] = STANDARD_ORDER,
                 title: str | None = None, ci: bool = False) -> str:
    """The whole page as text (``metrics``: the columns of a comparison; one run shows all
    standard metrics; ``ci``: the intervals of the eval outputs' ``ci.json``, shown as a
    comparison)."""
    single = len(sources) == 1 and len(sources[0].results) == 1 and not ci
    title = title or ("sodkit report: " + ", ".join(s.label for s in sources))
    body = _single(sources[0]) if single else _several(sources, metrics, ci)
    body = notes(sources) + body  # after the body: the gallery is where images are refused
    folders = ", ".join(_e(s.folder) for s in sources)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta name="generator" content="sodkit report {__version__}">'
            f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{_e(title)}</h1><p>From {folders}; written "
            f"{_e(time.strftime('%Y-%m-%d %H:%M'))} by sodkit {__version__}.</p>"
            f"{body}<script>{_SCRIPT}</script></body></html>\n")


def write_run_report(run_dir: Path | OutputFolder) -> None:
    """``report.html`` of a run folder (``train``, ``test``: the command writes it once the
    engine is done, rank 0); a failure is a warning: the results are written already (a refusal
    to replace a changed file too, and it says so)."""
    from ..errors import UserError
    from .run_results import output_folder

    outputs, run_dir = output_folder(run_dir)
    try:
        page = build_report(load_sources([run_dir]))
        outputs.write_text(run_dir / "report.html", page)
        logger.info("report: %s", run_dir / "report.html")
    except UserError as exc:
        logger.warning("report.html not written: %s", exc)
    except Exception:  # never lose a finished run over its report
        logger.warning("report.html not written", exc_info=True)
