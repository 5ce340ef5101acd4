"""Outputs by kind (docs/reliability.md, section 3): a command replaces or deletes only outputs of
its own kind that it wrote and that nobody changed since; inputs are never outputs.

Each test builds the user's files, runs the command as a user would (``sodkit.cli.main``), and
checks every byte that must stay is still there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from sodkit.outputs import MARKER, RECORD
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "no error message"
    assert "Traceback" not in err[-1]
    return err[-1]


@pytest.fixture()
def preds(tmp_path: Path) -> Path:
    """gt/ and ours/ (predictions) of four images."""
    rng = np.random.default_rng(5)
    for folder in ("gt", "ours"):
        (tmp_path / folder).mkdir()
    for i, (h, w) in enumerate([(40, 60), (50, 50), (33, 70), (64, 48)]):
        pred, gt = realistic_pair(rng, h, w)
        cv2.imwrite(str(tmp_path / "gt" / f"im{i}.png"), gt)
        cv2.imwrite(str(tmp_path / "ours" / f"im{i}.png"), pred)
    return tmp_path


def run_eval(folder: Path, out: Path, *extra: str) -> int:
    return main(["eval", "--gt", str(folder / "gt"), "--pred", f"ours={folder / 'ours'}",
                 "--out", str(out), *extra])


def copy_run(trained: Path, to: Path) -> Path:
    """A copy of the session's run; its checkpoints (386 MB, replaced only by renames) are
    hard links, so the copy takes milliseconds."""
    def link_or_copy(src: str, dst: str) -> None:
        if src.endswith(".pt"):
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(trained, to, symlinks=True, copy_function=link_or_copy)
    return to


# ---------------------------------------------------------------- other kinds are never touched
def test_test_overwrite_never_deletes_a_training_run(trained, data_root, tmp_path, capsys):
    run = copy_run(trained, tmp_path / "other_run")
    before = snapshot(run)
    args = ["test", str(DEMO), *tiny_overrides(data_root, tmp_path, "x"),
            "--checkpoint", str(trained / "checkpoints" / "last.pt"), "--out", str(run)]
    for extra in ([], ["--overwrite"]):
        assert main([*args, *extra]) == 2
        line = error_line(capsys)
        assert "sodkit train" in line and str(run) in line, line
    assert snapshot(run) == before


def test_eval_never_writes_into_a_training_run(trained, data_root, tmp_path, capsys):
    run = copy_run(trained, tmp_path / "run")
    before = snapshot(run)
    gt = data_root / "DUTS-TE" / "DUTS-TE-Mask"
    args = ["eval", "--gt", str(gt), "--pred", f"m={trained / 'predictions' / 'DUTS-TE'}",
            "--out", str(run)]
    for extra in ([], ["--force"]):  # --force does not make another command's folder eval's
        assert main([*args, *extra]) == 2
        assert "sodkit train" in error_line(capsys)
    assert snapshot(run) == before


def test_a_single_file_is_never_written_into_another_commands_folder(trained, tmp_path, capsys):
    run = copy_run(trained, tmp_path / "run")
    before = snapshot(run)
    assert main(["report", str(trained), "--out", str(run / "compare.html"), "--force"]) == 2
    assert "sodkit train" in error_line(capsys)
    assert snapshot(run) == before


# ---------------------------------------------------------------- inputs are never outputs
def test_nothing_is_written_inside_an_input_folder(preds, capsys):
    before = snapshot(preds)
    for out in (preds / "gt" / "res", preds / "ours" / "res"):
        for extra in ([], ["--force"]):
            assert run_eval(preds, out, *extra) == 2
            assert "inside the input" in error_line(capsys)
    assert main(["eval", "--gt", str(preds / "gt"), "--pred", f"ours={preds / 'ours'}",
                 "--out", str(preds / "res"), "--latex", str(preds / "gt" / "t.tex")]) == 2
    assert snapshot(preds) == before


def test_test_and_predict_write_nothing_inside_their_image_folders(trained, data_root, tmp_path,
                                                                  capsys):
    data = tmp_path / "data"
    shutil.copytree(data_root / "DUTS-TE", data / "DUTS-TE")
    images = data / "DUTS-TE" / "DUTS-TE-Image"
    before = snapshot(data)
    ckpt = str(trained / "checkpoints" / "last.pt")
    assert main(["test", str(DEMO), *tiny_overrides(data, tmp_path, "x"), "--checkpoint", ckpt,
                 "--out", str(images / "res")]) == 2
    assert "inside the input" in error_line(capsys)
    assert main(["predict", "--checkpoint", ckpt, "--out", str(images / "masks"), "--force",
                 str(images)]) == 2
    assert "inside the input" in error_line(capsys)
    assert snapshot(data) == before


def test_report_never_writes_over_its_inputs_even_with_force(trained, tmp_path, capsys):
    run = copy_run(trained, tmp_path / "run")
    before = snapshot(run)
    for target in ("results.json", "report.html", "new.html"):
        assert main(["report", str(run), "--out", str(run / target), "--force"]) == 2
        assert "input" in error_line(capsys)
    assert main(["report", str(run), "--out", str(tmp_path / "r.html"), "--latex",
                 str(run / "t.tex"), "--force"]) == 2
    assert snapshot(run) == before and not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------- own outputs, unchanged only
def test_eval_replaces_only_its_own_unchanged_files(preds, capsys):
    out = preds / "res"
    assert run_eval(preds, out) == 0
    assert json.loads((out / MARKER).read_text())["kind"] == "eval"
    assert run_eval(preds, out) == 0  # its own files, unchanged: replaced without --force
    (out / "results.md").write_text("my notes on these numbers\n")
    before = snapshot(out)
    assert run_eval(preds, out) == 2
    line = error_line(capsys)
    assert "results.md" in line and "--force" in line
    assert snapshot(out) == before
    assert run_eval(preds, out, "--force") == 0
    assert (out / "results.md").read_text().startswith("| method |")


def test_a_hand_edited_table_is_never_replaced(preds, capsys):
    tex, sheet = preds / "paper" / "t.tex", preds / "paper" / "t.xlsx"
    tables = ["--latex", str(tex), "--xlsx", str(sheet)]
    assert run_eval(preds, preds / "res", *tables) == 0
    assert run_eval(preds, preds / "res", *tables) == 0  # unchanged: replaced
    edited = tex.read_text().replace("\\bottomrule", "\\midrule\nmine & 1 \\\\\n\\bottomrule")
    tex.write_text(edited)  # the signature line is still the first line
    assert run_eval(preds, preds / "res", *tables) == 2
    line = error_line(capsys)
    assert "t.tex" in line and "--force" in line
    assert tex.read_text() == edited
    assert run_eval(preds, preds / "res", *tables, "--force") == 0
    assert tex.read_text() != edited

    import openpyxl

    book = openpyxl.load_workbook(sheet)
    book.active.cell(3, 2, 0.999)
    book.save(sheet)  # still sodkit's creator property
    kept = sheet.read_bytes()
    assert run_eval(preds, preds / "res", "--xlsx", str(sheet)) == 2
    assert "t.xlsx" in error_line(capsys) and sheet.read_bytes() == kept


def test_a_page_that_quotes_the_generator_tag_is_not_replaced(trained, tmp_path, capsys):
    page = tmp_path / "notes.html"
    page.write_text('<p>sodkit marks its pages with <meta name="generator" content="sodkit '
                    'report 0.2.0"> in the head</p>\n')
    kept = page.read_bytes()
    assert main(["report", str(trained), "--out", str(page)]) == 2
    assert "--force" in error_line(capsys) and page.read_bytes() == kept
    mine = tmp_path / "r.html"
    assert main(["report", str(trained), "--out", str(mine)]) == 0
    assert main(["report", str(trained), "--out", str(mine)]) == 0  # unchanged: replaced
    mine.write_text(mine.read_text().replace("</body>", "<p>my conclusions</p></body>"))
    kept = mine.read_bytes()
    assert main(["report", str(trained), "--out", str(mine)]) == 2
    assert mine.read_bytes() == kept


def test_test_overwrite_deletes_only_its_own_unchanged_outputs(trained, data_root, tmp_path,
                                                               capsys):
    out = tmp_path / "tested"
    args = ["test", str(DEMO), *tiny_overrides(data_root, tmp_path, "x"),
            "--checkpoint", str(trained / "checkpoints" / "last.pt"), "--out", str(out)]
    assert main(args) == 0
    assert json.loads((out / MARKER).read_text())["kind"] == "test"
    (out / "notes.txt").write_text("mine\n")
    (out / "results.md").write_text("edited\n")
    before = snapshot(out)
    assert main([*args, "--overwrite"]) == 2
    line = error_line(capsys)
    assert "notes.txt" in line or "results.md" in line, line
    assert snapshot(out) == before
    (out / "notes.txt").unlink()
    assert main([*args, "--overwrite"]) == 2
    assert "results.md" in error_line(capsys)
    assert snapshot(out) == {k: v for k, v in before.items() if k != "notes.txt"}
    # with only its own files left, --overwrite replaces the folder:
    # tests/test_safety.py::test_sodkit_test_leaves_the_training_results_alone


# ---------------------------------------------------------------- markers of earlier versions
def test_a_marker_without_kind_is_a_run_to_train_and_nothing_else(preds, trained, tmp_path,
                                                                   capsys):
    from sodkit.outputs import claim

    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / MARKER).write_text("")  # `touch .sodkit-run`, as docs said for 0.1 runs
    (legacy / "results.json").write_text("{}\n")
    assert run_eval(preds, legacy) == 2
    line = error_line(capsys)
    assert "which command" in line and "sodkit train" in line, line
    assert (legacy / "results.json").read_text() == "{}\n"
    claim(legacy, "train", what="run folder")  # what `sodkit train --resume auto` does first
    assert json.loads((legacy / MARKER).read_text())["kind"] == "train"
    assert (legacy / RECORD).is_file()  # a record from now on; its files stay the user's


def test_a_run_of_an_earlier_version_resumes(trained, data_root, tmp_path):
    run = copy_run(trained, tmp_path / "old")
    (run / MARKER).write_text('{"sodkit": "0.2.0", "kind": "train"}\n')  # no record of files
    (run / RECORD).unlink(missing_ok=True)
    args = ["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "old"), "--resume", "auto"]
    assert main(args) == 0
    assert json.loads((run / MARKER).read_text())["kind"] == "train"
    assert (run / RECORD).is_file()


def test_a_run_whose_results_were_edited_stops_before_training(trained, data_root, tmp_path,
                                                               capsys):
    run = copy_run(trained, tmp_path / "run")
    (run / "results.md").write_text("my reading of these numbers\n")
    before = snapshot(run)
    args = ["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "run"), "--resume", "auto"]
    assert main(args) == 2  # the run would replace it at its end: said now, not then
    line = error_line(capsys)
    assert "results.md" in line and "move it away" in line
    assert snapshot(run) == before
