"""What a newcomer reads in the first hour (#28): plurals, one epoch numbering, `predict
--skip-bad`, no third-party warning lines, dataset names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.text import noun_for, plural
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]


def test_plural_says_one_mask_and_two_masks() -> None:
    assert plural(1, "mask") == "1 mask" and plural(0, "mask") == "0 masks"
    assert plural(2, "worker process") == "2 worker processes"
    assert plural(3, "process") == "3 processes" and plural(1, "process") == "1 process"
    assert noun_for(1, "is") == "is" and noun_for(4, "is") == "are"
    assert plural(2, "epoch") == "2 epochs" and plural(2, "batch") == "2 batches"


def test_training_log_counts_in_the_right_number(trained) -> None:
    log = (trained / "train.log").read_text()
    assert "(4 per process x 1 accumulated x 1 process)" in log, log
    assert "4 steps/epoch x 2 epochs" in log and "train images 16" in log
    # not after a decimal point: "32.1 images/s" is a rate, not a count
    assert not re.search(r"(?<![\d.])1 (processes|masks|pairs|images|epochs|files|cores)\b",
                         log), log


def _photos(folder: Path, bad: bool) -> Path:
    """Three readable photos, and with ``bad`` two truncated PNGs: one cut in its pixel data
    (libpng's "PNG input buffer is incomplete"), one cut early (OpenCV's [ WARN ...] line)."""
    folder.mkdir()
    rng = np.random.default_rng(3)
    for i in range(3):
        cv2.imwrite(str(folder / f"photo{i}.png"), rng.integers(0, 256, (30, 40, 3), np.uint8))
    if bad:
        data = cv2.imencode(".png", rng.integers(0, 256, (64, 64, 3), np.uint8))[1].tobytes()
        (folder / "cut_late.png").write_bytes(data[: len(data) * 9 // 10])
        (folder / "cut_early.png").write_bytes(data[: len(data) * 3 // 10])
    return folder


def test_predict_one_image_says_one_mask(trained, tmp_path, run_cli) -> None:
    photo = _photos(tmp_path / "in", bad=False) / "photo0.png"
    done = run_cli("predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                   "--out", str(tmp_path / "out"), "--workers", "0", str(photo))
    assert done.returncode == 0, done.stderr
    assert f"wrote 1 mask to {tmp_path / 'out'}" in done.stderr, done.stderr
    assert "1 masks" not in done.stderr


@pytest.mark.parametrize("workers", ["0", "1"])
def test_predict_skip_bad_writes_the_rest_and_lists_the_skipped(trained, tmp_path, run_cli,
                                                                workers) -> None:
    photos = _photos(tmp_path / "in", bad=True)
    out = tmp_path / "out"
    done = run_cli("predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                   "--out", str(out), "--workers", workers, "--batch-size", "2", "--skip-bad",
                   str(photos))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.glob("*.png")) == [f"photo{i}.png" for i in range(3)]
    assert "skipped 2 images that could not be read" in done.stderr, done.stderr
    for name in ("cut_late.png", "cut_early.png"):
        assert str(photos / name) in done.stderr, done.stderr
    assert "wrote 3 masks" in done.stderr
    assert "[ WARN" not in done.stderr + done.stdout, done.stderr
    assert "libpng" not in done.stderr + done.stdout, done.stderr


@pytest.mark.parametrize("workers", ["0", "1"])
def test_predict_stays_strict_without_skip_bad_and_prints_no_third_party_line(
        trained, tmp_path, run_cli, workers) -> None:
    photos = _photos(tmp_path / "in", bad=True)
    done = run_cli("predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                   "--out", str(tmp_path / "out"), "--workers", workers, str(photos))
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "error: " in last and "cut_" in last and "--skip-bad" in last, last
    assert "[ WARN" not in done.stderr + done.stdout and "libpng" not in done.stderr


def test_check_data_full_on_a_truncated_png_prints_no_warn_line(data_root, tmp_path) -> None:
    """A fresh ``python -m sodkit`` process (OpenCV imported by sodkit itself)."""
    copy = tmp_path / "data"
    subprocess.run(["cp", "-r", str(data_root), str(copy)], check=True)
    image = sorted((copy / "DUTS-TE" / "DUTS-TE-Image").iterdir())[0]
    cv2.imwrite(str(image.with_suffix(".png")), cv2.imread(str(image)))
    data = image.with_suffix(".png").read_bytes()
    image.unlink()
    image.with_suffix(".png").write_bytes(data[: len(data) * 3 // 10])
    done = subprocess.run(
        [sys.executable, "-m", "sodkit", "check-data", str(ROOT / "configs" / "demo.yaml"),
         f"data_root={copy}", "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
         "--full"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert image.stem in done.stdout + done.stderr
    assert "[ WARN" not in done.stdout + done.stderr, done.stderr
    assert "libpng" not in done.stdout + done.stderr, done.stderr


def test_check_data_imports_no_torch(data_root) -> None:
    """check-data reads folders, headers and pixels: torch is not imported (0.4 s instead of
    3 s to start)."""
    code = ("import sys; from sodkit.cli import main; code = main(sys.argv[1:]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)")
    done = subprocess.run(
        [sys.executable, "-c", code, "check-data", str(ROOT / "configs" / "demo.yaml"),
         f"data_root={data_root}", "data.train=[{preset: duts-tr}]",
         "data.test=[{preset: duts-te}]", "--full"], cwd=ROOT, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr
    assert "0 problem(s)" in done.stdout, done.stdout


def test_one_epoch_numbering_in_the_log(trained) -> None:
    """Every line that says where the run stands says it as ``epoch E/N step S/T``, E counted
    from 1 and the epoch of step S: a save names the same position as the progress line of
    its step (no ``(epoch 1, step 4)`` beside ``epoch 2/2``)."""
    log = (trained / "train.log").read_text()
    said = re.findall(r"epoch (\d+)/(\d+) step (\d+)/(\d+)", log)
    saves = re.findall(r"saved \S+ \(epoch (\d+)/(\d+) step (\d+)/(\d+)\)", log)
    assert saves and said, log
    assert not re.search(r"epoch \d+, step", log), log
    steps_per_epoch = int(said[0][3]) // int(said[0][1])
    for epoch, _, step, _ in said:
        assert int(epoch) == -(-int(step) // steps_per_epoch), (epoch, step)
    progress = {s[2]: s for s in said if s not in saves}
    for save in saves:
        assert save[2] not in progress or progress[save[2]] == save


# ------------------------------------------------------------------ dataset names
def test_a_preset_pointed_at_another_root_takes_the_root_name(data_root, tmp_path) -> None:
    from sodkit.config.schema import DatasetCfg
    from sodkit.data.pairs import resolve_dataset

    mine = tmp_path / "MY-TR"
    subprocess.run(["cp", "-r", str(data_root / "DUTS-TR"), str(mine)], check=True)
    (tmp_path / "duts-tr").symlink_to(mine)
    named = {cfg.root: resolve_dataset(cfg, str(tmp_path)).name for cfg in [
        DatasetCfg(preset="duts-tr", root="MY-TR"),
        DatasetCfg(preset="duts-tr", root="duts-tr"),  # the preset's own name, its spelling
        DatasetCfg(preset="duts-tr", root=str(data_root / "DUTS-TR")),
    ]}
    assert named == {"MY-TR": "MY-TR", "duts-tr": "DUTS-TR",
                     str(data_root / "DUTS-TR"): "DUTS-TR"}
    given = DatasetCfg(preset="duts-tr", root="MY-TR", name="mine")
    assert resolve_dataset(given, str(tmp_path)).name == "mine"


def test_results_json_names_a_preset_dataset_after_its_root(trained, data_root, tmp_path,
                                                            run_cli) -> None:
    other = tmp_path / "MY-TE"
    subprocess.run(["cp", "-r", str(data_root / "DUTS-TE"), str(other)], check=True)
    out = tmp_path / "out"
    done = run_cli("test", str(ROOT / "configs" / "demo.yaml"),
                   *tiny_overrides(data_root, tmp_path, "x"),
                   f"data.test=[{{preset: duts-te, root: {other}}}]",
                   "--checkpoint", str(trained / "checkpoints" / "last.pt"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    import json

    assert list(json.loads((out / "results.json").read_text())) == ["MY-TE"]


def test_eval_names_a_generic_gt_folder_after_its_parent(trained, data_root, tmp_path,
                                                         run_cli) -> None:
    """``--gt .../ECSSD/masks`` is ECSSD; ``DUTS-TE/DUTS-TE-Mask`` is DUTS-TE; the log says so."""
    ecssd = tmp_path / "ECSSD" / "masks"
    ecssd.parent.mkdir()
    subprocess.run(["cp", "-r", str(data_root / "DUTS-TE" / "DUTS-TE-Mask"), str(ecssd)],
                   check=True)
    preds = trained / "predictions" / "DUTS-TE"
    import json

    for gt, name in [(ecssd, "ECSSD"), (data_root / "DUTS-TE" / "DUTS-TE-Mask", "DUTS-TE")]:
        out = tmp_path / f"out-{name}"
        done = run_cli("eval", "--gt", str(gt), "--pred", f"ours={preds}", "--out", str(out),
                       "--workers", "1")
        assert done.returncode == 0, done.stderr
        assert f"dataset {name}: the GT folder {gt}" in done.stderr, done.stderr
        assert name in json.loads((out / "evaluation.json").read_text())["datasets"]
        assert f"\n{name}\n" in done.stdout, done.stdout


def test_results_md_holds_the_paper_metrics_and_csv_all(trained) -> None:
    """The run's results.md: a row per test set, the 9 standard columns (not 30-odd with
    maxBER and the like); results.csv and results.json keep every metric."""
    import json

    header = (trained / "results.md").read_text().splitlines()[0]
    assert header == ("| dataset | MAE | Smeasure | wFmeasure | maxFm | meanFm | adpFm | maxEm "
                      "| meanEm | adpEm |")
    every = json.loads((trained / "results.json").read_text())["DUTS-TE"]
    assert "maxBER" in every and len(every) > 20
    csv_header = (trained / "results.csv").read_text().splitlines()[0].split(",")
    assert len(csv_header) == len(every) + 1


def test_readme_quick_start_reaches_predict_on_own_photos(trained, tmp_path, run_cli) -> None:
    """The README's commands after ``make demo``, word for word: ``sodkit`` is put on the PATH
    first (it lives in .venv/bin, which the Makefile fills), then ``sodkit predict`` runs on a
    folder of photos with the demo's checkpoint (here the test run's)."""
    import shlex

    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", quick, re.S)
    lines = [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines()]
    first_sodkit = next(i for i, line in enumerate(lines) if line.startswith("sodkit "))
    assert ". .venv/bin/activate" in lines[:first_sodkit], lines
    assert "$(BIN)/pip install" in (ROOT / "Makefile").read_text()  # .venv/bin/sodkit
    words = shlex.split(lines[first_sodkit])
    assert words[:2] == ["sodkit", "predict"], words
    photos = _photos(tmp_path / "photos", bad=False)
    where = {"output/demo/checkpoints/best.pt": str(trained / "checkpoints" / "best.pt"),
             "my_masks": str(tmp_path / "my_masks"), "path/to/photos": str(photos)}
    assert set(where) <= set(words), words
    done = run_cli(*[where.get(word, word) for word in words[1:]])
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "my_masks").glob("*.png"))) == 3


def test_samples_png_has_column_titles_and_scores_per_row(trained) -> None:
    """samples.png: a title band over image | GT | prediction and, right of each row, its name,
    MAE and S-measure, the same as results_per_image.csv; the PNG's text says it too."""
    import csv

    from PIL import Image

    with Image.open(trained / "samples.png") as image:
        text, pixels = dict(image.text), np.asarray(image.convert("RGB"))
    assert text["Columns"] == "image | GT | prediction"
    rows = text["Rows"].splitlines()
    assert len(rows) == 3, rows  # eval.num_samples=3 in tiny_overrides
    with open(trained / "results_per_image.csv", newline="") as handle:
        scores = {row["stem"]: row for row in csv.DictReader(handle)}
    for line in rows:
        match = re.fullmatch(r"DUTS-TE/(\S+): MAE (\d\.\d{4}), Smeasure (\d\.\d{4})", line)
        assert match, line
        assert float(match[2]) == pytest.approx(float(scores[match[1]]["MAE"]), abs=5e-5)
        assert float(match[3]) == pytest.approx(float(scores[match[1]]["Smeasure"]), abs=5e-5)
    tile, gap, header = 64, 2, 22  # data.size=64
    grid_h, grid_w = 3 * tile + 2 * gap, 3 * tile + 2 * gap
    assert pixels.shape[0] == header + grid_h and pixels.shape[1] > grid_w + 40, pixels.shape
    for column in range(3):  # a title drawn over each column, a score beside each row
        x = column * (tile + gap)
        assert (pixels[:header, x: x + tile] < 128).any(), column
    assert (pixels[header:, grid_w:] < 128).any()


# ------------------------------------------------------------------ the report
def test_report_marks_ranks_without_the_colours_of_the_curves() -> None:
    """Rank marks are bold / underline / italic: on the page, a colour means a line of a plot."""
    from sodkit.report import html

    rules = dict(re.findall(r"\.(rank\d)\{([^}]*)\}", html._STYLE))
    assert sorted(rules) == ["rank1", "rank2", "rank3"]
    assert not any("color" in rule for rule in rules.values()), rules
    assert len(set(rules.values())) == 3
    table = html.comparison_table({"a": {"X": {"MAE": 0.1}}, "b": {"X": {"MAE": 0.2}}},
                                  ["X"], ["MAE"])
    assert "first in bold" in table and "second underlined" in table
    assert re.search(r'<td[^>]*class="rank1"[^>]*>0\.1000', table), table


def test_lr_plot_draws_identical_groups_once_and_says_so() -> None:
    from sodkit.report.figures import training_figure, training_lines

    points = [(1, 0.01), (2, 0.02), (3, 0.01)]
    series = {"loss/loss": [(1, 0.9), (2, 0.5), (3, 0.4)], "lr/backbone": points,
              "lr/decoder": list(points), "lr/head": list(points), "lr/other": [(1, 0.1)] * 3}
    losses, rates = training_lines(series)
    assert [label for label, _ in losses] == ["loss"]
    assert [label for label, _ in rates] == ["backbone, decoder, head (identical)", "other"]
    figure = training_figure(series)
    lr_axes = figure.axes[1]
    assert len(lr_axes.lines) == 2
    legend = [text.get_text() for text in lr_axes.get_legend().get_texts()]
    assert legend == ["backbone, decoder, head (identical)", "other"]


def test_training_plot_of_a_single_step_shows_the_point_and_its_value() -> None:
    from sodkit.report.figures import training_figure

    figure = training_figure({"loss/loss": [(1, 0.6931)], "lr/all": [(1, 0.001)]})
    for axes, value in zip(figure.axes, ("0.6931", "0.001"), strict=True):
        (line,) = axes.lines
        assert line.get_marker() == "o" and list(line.get_xdata()) == [1]
        assert [text.get_text() for text in axes.texts] == [value]
