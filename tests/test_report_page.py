"""``report.html`` of a short training run, opened in a real headless Chromium; the per-image
scores behind its gallery; and what ``sodkit report`` reads without torch.

The browser is started by the test (``tests/browser.py``); where none is installed the browser
test is skipped and says why (CI installs Debian's ``chromium`` in ``.ci/run``).
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sodkit.cli import main
from sodkit.report.sources import load_source
from sodkit.report.training import checkpoint_info, training_scalars
from tests.browser import Browser, find_chromium
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_sets(data_root, tmp_path_factory) -> Path:
    """A 1-epoch run tested on DUTS-TE and on HALF (every other DUTS-TE image)."""
    out = tmp_path_factory.mktemp("report_runs")
    stems = sorted(p.stem for p in (data_root / "DUTS-TE" / "DUTS-TE-Mask").glob("*.png"))
    listing = out / "half.txt"
    listing.write_text("\n".join(stems[::2]) + "\n")
    overrides = [*tiny_overrides(data_root, out, "r", epochs=1),
                 f"data.test=[{{preset: duts-te}}, {{preset: duts-te, name: HALF, "
                 f"list_file: {listing}}}]"]
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0
    return out / "r"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium on PATH (Debian: apt-get install chromium; or set "
                    "SODKIT_CHROMIUM); .ci/run installs it")
    page = Browser(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield page
    page.close()


ROWS = ("Array.from(document.querySelectorAll('#results tbody tr')).map(r => "
        "Array.from(r.cells).map(c => [c.getAttribute('data-value'), c.textContent]))")


def test_report_opens_in_chromium_with_the_numbers_of_results_json(two_sets, browser):
    browser.open(two_sets / "report.html")
    assert browser.errors() == []
    results = json.loads((two_sets / "results.json").read_text())
    heads = browser.evaluate("Array.from(document.querySelectorAll('#results thead th'))"
                             ".map(h => h.getAttribute('data-metric'))")[1:]
    rows = browser.evaluate(ROWS)
    assert [row[0][0] for row in rows] == list(results) == ["DUTS-TE", "HALF"]
    for row in rows:
        for metric, (value, text) in zip(heads, row[1:], strict=True):
            expected = results[row[0][0]][metric]
            assert float(value) == expected and text == f"{expected:.4f}", metric
    images = browser.evaluate("Array.from(document.images).map(i => [i.complete, "
                              "i.naturalWidth, i.alt])")
    tiles = sum(1 for _, _, alt in images if alt in ("image", "gt", "prediction"))
    assert tiles == 3 * (6 + 3)  # image | GT | prediction of every image: best 4 + worst <= 4
    assert {alt for _, _, alt in images} >= {"training curves", "curves"}
    assert all(complete and width > 0 for complete, width, _ in images), images
    assert browser.errors() == []


def test_sorting_by_a_column_reorders_the_rows(two_sets, browser):
    browser.open(two_sets / "report.html")
    results = json.loads((two_sets / "results.json").read_text())
    assert results["DUTS-TE"]["MAE"] != results["HALF"]["MAE"]
    by_mae = sorted(results, key=lambda name: results[name]["MAE"])
    order = "Array.from(document.querySelectorAll('#results tbody tr')).map(r => r.dataset.dataset)"
    browser.click("#results th[data-metric='MAE']")
    assert browser.evaluate(order) == by_mae
    browser.click("#results th[data-metric='MAE']")
    assert browser.evaluate(order) == by_mae[::-1]
    assert browser.errors() == []


def test_comparison_page_in_chromium(two_sets, trained, browser, tmp_path):
    out = tmp_path / "compare.html"
    assert main(["report", str(two_sets), str(trained), "--out", str(out)]) == 0
    browser.open(out)
    assert browser.errors() == []
    methods = ("Array.from(document.querySelectorAll('#comparison tbody tr'))"
               ".map(r => r.dataset.method)")
    assert browser.evaluate(methods) == ["r", "t"]
    browser.click("#comparison th[data-col='0']")
    browser.click("#comparison th[data-col='0']")
    assert browser.evaluate(methods) == ["t", "r"]
    marked = browser.evaluate("document.querySelectorAll('#comparison td.rank1').length")
    assert marked >= 5  # every DUTS-TE column has a first place (HALF only has run r)
    images = browser.evaluate("Array.from(document.images).map(i => i.naturalWidth)")
    assert images and all(width > 0 for width in images)


def _per_image(folder: Path) -> list[dict[str, str]]:
    with open(folder / "results_per_image.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_per_image_mae_averages_to_the_dataset_mae(trained, two_sets):
    for folder in (trained, two_sets):
        results = json.loads((folder / "results.json").read_text())
        rows = _per_image(folder)
        for dataset, values in results.items():
            mine = [float(r["MAE"]) for r in rows if r["dataset"] == dataset]
            assert len(mine) == (6 if dataset == "DUTS-TE" else 3)
            assert abs(np.mean(mine) - values["MAE"]) <= 1e-12
            for key in ("Smeasure", "wFmeasure", "adpFm", "meanEm", "adpEm"):
                column = [float(r[key]) for r in rows if r["dataset"] == dataset]
                assert abs(np.mean(column) - values[key]) <= 1e-12, key
    row = _per_image(trained)[0]
    assert (trained / row["prediction"]).is_file() and Path(row["image"]).is_file()


def test_sodkit_test_writes_per_image_scores_and_a_report(trained, tmp_path):
    out = tmp_path / "tested"
    assert main(["test", str(trained / "config.yaml"), "--checkpoint",
                 str(trained / "checkpoints" / "last.pt"), "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    mae = [float(r["MAE"]) for r in _per_image(out)]
    assert abs(np.mean(mae) - results["DUTS-TE"]["MAE"]) <= 1e-12
    assert (out / "report.html").is_file() and (out / "curves.json").is_file()


def test_checkpoint_epoch_and_step_are_read_without_running_code(trained):
    import torch

    for name in ("last.pt", "best.pt"):
        state = torch.load(trained / "checkpoints" / name, weights_only=True)
        info = checkpoint_info(trained / "checkpoints" / name)
        assert (info["epoch"], info["step"], info["best"]) == (state["epoch"], state["step"],
                                                               state["best"])


def test_training_curves_from_events_and_from_train_log(trained, tmp_path):
    from_events = training_scalars(trained)
    assert {"loss/loss", "loss/bce", "loss/iou"} <= set(from_events)
    assert any(tag.startswith("lr/") for tag in from_events)
    copy = tmp_path / "no_tb"
    copy.mkdir()
    shutil.copy(trained / "train.log", copy / "train.log")
    from_log = training_scalars(copy)
    for tag in ("loss/loss", "loss/bce"):
        steps = [s for s, _ in from_events[tag]]
        assert [s for s, _ in from_log[tag]] == steps
        assert np.allclose([v for _, v in from_log[tag]], [v for _, v in from_events[tag]],
                           atol=1e-4)


def test_report_and_eval_do_not_import_torch(trained, data_root, tmp_path):
    gt = data_root / "DUTS-TE" / "DUTS-TE-Mask"
    evaluate = ["eval", "--gt", str(gt), "--pred", str(trained / "predictions" / "DUTS-TE"),
                "--out", str(tmp_path / "ev"), "--latex", str(tmp_path / "t.tex")]
    report = ["report", str(trained), str(tmp_path / "ev"), "--out", str(tmp_path / "r.html")]
    script = ("import sys\nfrom sodkit.cli import main\n"
              f"assert main({evaluate!r}) == 0\nassert main({report!r}) == 0\n"
              "assert 'torch' not in sys.modules, 'torch was imported'\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert load_source(trained).checkpoints  # and the page's data is all there


def test_report_never_replaces_a_file_it_did_not_write(trained, tmp_path, capsys):
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    assert main(["report", str(trained), "--out", str(mine)]) == 2
    assert "was not written by sodkit" in capsys.readouterr().err
    assert mine.read_text() == "my notes"
    assert main(["report", str(trained), "--out", str(mine), "--force"]) == 0
    assert main(["report", str(trained), "--out", str(mine)]) == 0  # now it is sodkit's
    assert main(["report", str(trained), "--out", str(trained / "results.json")]) == 2
    assert json.loads((trained / "results.json").read_text())


class _Touch:
    """Unpickling this calls ``Path.touch`` on its target: code a checkpoint could carry."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (Path.touch, (self.target,))


def test_checkpoint_peek_never_calls_what_the_file_names(tmp_path):
    import pickle
    import zipfile

    target = tmp_path / "was_run"
    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps({"epoch": 3, "step": 12,
                                                        "hook": _Touch(target)}))
    info = checkpoint_info(path)
    assert (info["epoch"], info["step"]) == (3, 12)
    assert not target.exists()
    pickle.loads(pickle.dumps(_Touch(target)))  # the same object, unpickled normally, runs
    assert target.exists()
