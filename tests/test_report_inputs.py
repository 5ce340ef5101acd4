"""``sodkit report`` reads folders received from others: it reads only what lies inside them
(and the dataset folders their evaluation recorded), tells apart methods of the same name, and
ends any malformed file in one line naming it (docs/reliability.md, section 9).

Every folder here is written by hand, as someone else could have sent it; no training runs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.report.figures import thumbnail_uri
from sodkit.report.tables import PER_IMAGE_COLUMNS

ROOT = Path(__file__).resolve().parents[1]
SCORES = {"MAE": 0.1, "Smeasure": 0.8, "wFmeasure": 0.7, "maxFm": 0.9, "adpFm": 0.85,
          "maxEm": 0.9, "meanEm": 0.8, "adpEm": 0.85}


def picture(path: Path, value: int) -> Path:
    """A small PNG whose thumbnail is told apart by ``value``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = np.full((24, 32, 3), value, np.uint8)
    image[4:12, 4:20] = 255 - value
    assert cv2.imwrite(str(path), image)
    return path


def per_image_csv(folder: Path, rows: list[dict[str, str]]) -> None:
    with open(folder / "results_per_image.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=PER_IMAGE_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({"method": "", **{k: repr(v) for k, v in SCORES.items()}, **row})


def run_folder(folder: Path, name: str, results: dict | None = None) -> Path:
    """A run folder as ``sodkit train`` leaves it (the parts the report reads)."""
    folder.mkdir(parents=True)
    (folder / ".sodkit-run").write_text('{"kind": "train"}\n')
    (folder / "config.yaml").write_text(f"name: {name}\n")
    results = results or {"DUTS-TE": {"MAE": 0.1, "Smeasure": 0.8, "maxFm": 0.9}}
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def eval_folder(folder: Path, results: dict) -> Path:
    """An output of ``sodkit eval`` (one dataset, at the folder's top)."""
    folder.mkdir(parents=True)
    (folder / "evaluation.json").write_text(json.dumps({"kind": "eval",
                                                        "datasets": {"DUTS-TE": "."}}))
    (folder / "results.json").write_text(json.dumps(results))
    return folder


# ------------------------------------------------------------- nothing foreign is read
def test_a_report_embeds_no_file_from_outside_its_folders(tmp_path, run_cli):
    """A received run names the user's private photo (absolute, ``../`` and through symbolic
    links); the page embeds none of it, says what it skipped, and still shows the run's own
    predictions."""
    secret = picture(tmp_path / "home" / "private" / "holiday.png", 40)
    (tmp_path / "home" / "notes.txt").write_text("my bank password is hunter2\n")
    run = run_folder(tmp_path / "received" / "run", "theirs")
    own = picture(run / "predictions" / "DUTS-TE" / "a.png", 200)
    picture(run / "predictions" / "DUTS-TE" / "placeholder.png", 0)
    (run / "predictions" / "DUTS-TE" / "b.png").symlink_to(secret)
    (run / "config.yaml").unlink()
    (run / "config.yaml").symlink_to(tmp_path / "home" / "notes.txt")
    per_image_csv(run, [
        {"dataset": "DUTS-TE", "stem": "a", "image": str(secret),
         "gt": "../../home/private/holiday.png", "prediction": "predictions/DUTS-TE/a.png"},
        {"dataset": "DUTS-TE", "stem": "b", "image": "", "gt": "",
         "prediction": "predictions/DUTS-TE/b.png"},
    ])
    out = tmp_path / "page.html"
    proc = run_cli("report", str(run), "--out", str(out), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert thumbnail_uri(secret) not in page
    assert "hunter2" not in page
    assert thumbnail_uri(own) in page  # the run's own files are still shown
    warnings = [line for line in proc.stderr.splitlines() if "outside" in line]
    assert len(warnings) == 1 and str(run) in warnings[0] and "4 files" in warnings[0], \
        proc.stderr
    assert "not read" in page and "holiday.png" in page  # the page says what it skipped


def test_a_report_shows_the_dataset_images_its_evaluation_recorded(tmp_path):
    """Images and GTs of the dataset folders a run's evaluation recorded (``datasets.json``)
    are shown; a file beside them in a folder not recorded is not."""
    data = tmp_path / "data" / "DUTS-TE"
    image = picture(data / "Image" / "a.jpg", 90)
    gt = picture(data / "Mask" / "a.png", 255)
    stray = picture(tmp_path / "data" / "elsewhere" / "a.png", 60)
    run = run_folder(tmp_path / "run", "mine")
    pred = picture(run / "predictions" / "DUTS-TE" / "a.png", 180)
    (run / "datasets.json").write_text(json.dumps(
        {"DUTS-TE": {"images": str(data / "Image"), "masks": str(data / "Mask")}}))
    per_image_csv(run, [{"dataset": "DUTS-TE", "stem": "a", "image": str(image),
                         "gt": str(gt), "prediction": "predictions/DUTS-TE/a.png"},
                        {"dataset": "DUTS-TE", "stem": "b", "image": str(stray), "gt": "",
                         "prediction": ""}])
    out = tmp_path / "page.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    page = out.read_text()
    for shown in (image, gt, pred):
        assert thumbnail_uri(shown) in page, shown
    assert thumbnail_uri(stray) not in page
    assert str(data / "Image") in page  # the page names the folders it read outside the run


def test_eval_records_its_input_folders_and_the_report_shows_them(tmp_path):
    # a GT folder of its own name ("gt" would name the dataset after the folder above: #28)
    gt, pred = tmp_path / "truth", tmp_path / "preds" / "ours"
    picture(gt / "a.png", 255)
    picture(pred / "a.png", 120)
    assert main(["eval", "--gt", str(gt), "--pred", f"ours={pred}", "--out",
                 str(tmp_path / "ev")]) == 0
    manifest = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert sorted(manifest["inputs"]["truth"]) == sorted([str(gt.resolve()), str(pred.resolve())])
    out = tmp_path / "page.html"
    assert main(["report", str(tmp_path / "ev"), "--out", str(out)]) == 0
    page = out.read_text()
    assert thumbnail_uri(gt / "a.png") in page and thumbnail_uri(pred / "a.png") in page


# ------------------------------------------------------------- names that collide
def test_methods_of_the_same_name_in_two_folders_are_both_shown(tmp_path, run_cli):
    run = run_folder(tmp_path / "runs" / "ours", "ours",
                     {"DUTS-TE": {"MAE": 0.111, "Smeasure": 0.8}})
    ev = eval_folder(tmp_path / "published", {"ours": {"MAE": 0.222, "Smeasure": 0.7},
                                              "other": {"MAE": 0.3, "Smeasure": 0.6}})
    out, table = tmp_path / "page.html", tmp_path / "t.tex"
    proc = run_cli("report", str(run), str(ev), "--out", str(out), "--latex", str(table),
                   "--metrics", "MAE,Smeasure", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    page = out.read_text()
    assert 'data-method="ours@ours"' in page and 'data-method="ours@published"' in page
    assert "0.1110" in page and "0.2220" in page  # both numbers survive
    assert 'data-method="other"' in page  # names that do not collide stay as they are
    lines = [line for line in err.splitlines() if "ours@ours" in line]
    assert len(lines) == 1 and str(ev) in lines[0] and str(run) in lines[0], err
    latex = table.read_text()
    assert "0.111" in latex and "0.222" in latex


def test_two_eval_outputs_with_the_same_methods_keep_every_row(tmp_path):
    first = eval_folder(tmp_path / "a" / "ev", {"m": {"MAE": 0.1}})
    second = eval_folder(tmp_path / "b" / "ev", {"m": {"MAE": 0.2}})
    out = tmp_path / "page.html"
    assert main(["report", str(first), str(second), "--out", str(out)]) == 0
    page = out.read_text()
    rows = [part.split('"')[0] for part in page.split('data-method="')[1:]]
    assert len(rows) == 2 and len(set(rows)) == 2 and all(r.startswith("m") for r in rows)
    assert "0.1000" in page and "0.2000" in page


# ------------------------------------------------------------- malformed files: one line
MALFORMED = [
    ("results.json", "{not json"),
    ("results.json", "[1, 2]"),
    ("results.json", '{"DUTS-TE": [0.1]}'),
    ("results.json", '{"DUTS-TE": {"MAE": "low"}}'),
    ("config.yaml", "name: [unclosed"),
    ("config.yaml", "- a list\n"),
    ("curves.json", '{"DUTS-TE": 3}'),
    ("datasets.json", '["/"]'),
    ("results_per_image.csv", "dataset,stem\nDUTS-TE,a\n"),
    ("results_per_image.csv", f"{','.join(PER_IMAGE_COLUMNS)}\n" + "x," * 3 + "high\n"),
]


@pytest.mark.parametrize(("name", "text"), MALFORMED)
def test_a_malformed_file_of_a_run_is_one_line_naming_it(tmp_path, name, text, run_cli):
    run = run_folder(tmp_path / "run", "r")
    (run / name).write_text(text)
    proc = run_cli("report", str(run), "--out", str(tmp_path / "p.html"), cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("sodkit report: error: ") and str(run / name) in lines[0]
    assert not (tmp_path / "p.html").exists()


@pytest.mark.parametrize("text", ['{"kind": "eval", "datasets": ["x"]}', "[]",
                                  '{"kind": "eval", "datasets": {"D": "../../elsewhere"}}',
                                  '{"kind": "eval", "datasets": {"D": "."}, "inputs": 7}'])
def test_a_malformed_evaluation_json_is_one_line_naming_it(tmp_path, text, run_cli):
    ev = eval_folder(tmp_path / "ev", {"m": {"MAE": 0.1}})
    (ev / "evaluation.json").write_text(text)
    proc = run_cli("report", str(ev), "--out", str(tmp_path / "p.html"), cwd=ROOT)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert str(ev / "evaluation.json") in lines[0] or str(ev) in lines[0]


def test_a_csv_field_over_the_field_limit_is_one_line(tmp_path, run_cli):
    """csv's default field limit is 128 KB; a longer field is a damaged or hostile file."""
    run = run_folder(tmp_path / "run", "r")
    per_image_csv(run, [{"dataset": "DUTS-TE", "stem": "x" * 200_000, "image": "", "gt": "",
                         "prediction": ""}])
    proc = run_cli("report", str(run), "--out", str(tmp_path / "p.html"), cwd=ROOT)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert str(run / "results_per_image.csv") in lines[0] and "line 2" in lines[0]


def test_a_damaged_tensorboard_file_is_skipped_with_a_warning(tmp_path, run_cli):
    run = run_folder(tmp_path / "run", "r")
    (run / "tb").mkdir()
    events = run / "tb" / "events.out.tfevents.1.host.1.0"
    events.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00garbage-not-a-record" * 50)
    (run / "train.log").write_text("x step 2/8 loss 0.91 (bce 0.52 iou 0.39) lr 2.00e-03\n"
                                   "x step 4/8 loss 0.81 (bce 0.42 iou 0.39) lr 2.00e-03\n")
    out = tmp_path / "p.html"
    proc = run_cli("report", str(run), "--out", str(out), cwd=ROOT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if str(run / "tb") in line]
    assert len(warnings) == 1 and "train.log" in warnings[0], proc.stderr
    assert 'alt="training curves"' in out.read_text()  # drawn from train.log instead
