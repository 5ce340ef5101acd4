"""An unrecorded file is the user's; outputs are confined by kind for every command that writes
(#32 items 2, 4 and 8): `import-weights --out` goes nowhere `export --model` may not, a folder
of an earlier sodkit (its marker, no record of files) keeps its files through `--overwrite`,
`predict --out` and `train --resume`, and a write and its record succeed or fail together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sodkit.errors import WriteFailed
from sodkit.outputs import MARKER, RECORD, OutputFolder, claim
from tests.conftest import ROOT
from tests.sod_fixtures import tiny_overrides, write_photos, write_tiny_checkpoint

DEMO = ROOT / "configs" / "demo.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line(done) -> str:
    """The error line (the log's lines come before it on stderr); no traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and lines and "Traceback" not in done.stderr, done.stderr
    assert lines[-1].startswith(f"sodkit {done.args[0]}: error: "), lines[-1]
    return lines[-1]


def old_folder(path: Path, kind: str, files: dict[str, bytes]) -> Path:
    """A folder as sodkit 0.2 left it: its marker with the kind, no record of its files."""
    path.mkdir(parents=True)
    (path / MARKER).write_text(json.dumps({"sodkit": "0.2.0", "kind": kind}) + "\n")
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    return write_tiny_checkpoint(tmp_path / "tiny.pt")


@pytest.fixture
def images(tmp_path) -> Path:
    return write_photos(tmp_path / "images")


# ------------------------------------------------------------------ import-weights --out
@pytest.mark.parametrize("kind", ["train", "eval", "test", "predict"])
def test_import_weights_writes_into_no_other_commands_folder(tmp_path, run_cli, kind):
    folder = old_folder(tmp_path / "out", kind, {"results.json": b"{}\n"})
    claim(folder, kind)  # as that command leaves it today: marker and record
    source = tmp_path / "model-32"
    source.write_bytes(b"not read")
    before = snapshot(folder)
    for extra in ([], ["--force"]):
        done = run_cli("import-weights", "f3net-r50", str(source), "--out",
                       str(folder / "m.safetensors"), *extra)
        assert "another command's folder" in one_line(done) and str(folder) in done.stderr
    assert snapshot(folder) == before


def test_import_weights_checks_every_name_before_the_file_is_read(tmp_path, run_cli):
    source = tmp_path / "model-32"
    source.write_bytes(b"not read")  # reading it would be another error
    (tmp_path / "dir.safetensors").mkdir()
    for out, words in ((tmp_path / "missing" / "dir" / "m.safetensors", "does not exist"),
                       (source, "ends in .safetensors"),
                       (tmp_path / "dir.safetensors", "is a folder")):
        assert words in one_line(run_cli("import-weights", "f3net-r50", str(source), "--out",
                                         str(out)))
    done = run_cli("import-weights", "f3net-r50", str(tmp_path / "nowhere.pth"), "--out",
                   str(tmp_path / "m.safetensors"))
    assert "file not found" in one_line(done)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "m.safetensors").exists()


# ------------------------------------------------------------------ folders of an earlier sodkit
def test_overwrite_of_an_earlier_run_folder_keeps_the_user_s_file(tmp_path, data_root, run_cli):
    run = old_folder(tmp_path / "runs" / "old", "train",
                     {"notes.txt": b"what I tried\n", "checkpoints/last.pt": b"x",
                      "train.log": b"log\n"})
    before = snapshot(run)
    done = run_cli("train", str(DEMO), *tiny_overrides(data_root, tmp_path / "runs", "old"),
                   "--overwrite")
    line = one_line(done)
    assert "notes.txt" in line and "no record" in line and "nothing deleted" in line, line
    assert snapshot(run) == before


def test_predict_into_an_earlier_predict_folder_keeps_a_hand_edited_mask(tmp_path, checkpoint,
                                                                         images, run_cli):
    out = old_folder(tmp_path / "masks", "predict", {"im0.png": b"my hand-edited mask"})
    args = ["predict", "--checkpoint", str(checkpoint), "--out", str(out), "--workers", "0",
            str(images)]
    line = one_line(run_cli(*args))
    assert "im0.png" in line and "--force" in line, line
    assert (out / "im0.png").read_bytes() == b"my hand-edited mask"
    assert not (out / "im1.png").exists()  # refused before any work
    assert run_cli(*args, "--force").returncode == 0  # told to: replaced
    assert (out / "im0.png").read_bytes() != b"my hand-edited mask"
    assert run_cli(*args).returncode == 0  # now each is its own, unchanged: replaced again


def test_an_earlier_run_resumed_stops_before_training_at_a_result_it_would_replace(
        tmp_path, data_root, run_cli):
    run = old_folder(tmp_path / "runs" / "old", "train", {"results.md": b"my notes\n"})
    before = snapshot(run)
    done = run_cli("train", str(DEMO), *tiny_overrides(data_root, tmp_path / "runs", "old"),
                   "--resume", "auto")
    line = one_line(done)
    assert "results.md" in line and "move it away" in line and "--force" not in line, line
    assert (run / "results.md").read_bytes() == before["results.md"]
    assert not (run / "checkpoints").exists()


# ------------------------------------------------------------------ a write and its record
def test_a_write_whose_record_cannot_be_appended_is_not_made(tmp_path):
    folder = claim(tmp_path / "out", "eval")
    folder.write_text(tmp_path / "out" / "a.txt", "first\n")
    (tmp_path / "out" / RECORD).unlink()
    (tmp_path / "out" / RECORD).mkdir()  # the record cannot be written (as on a full disk)
    folder = OutputFolder(tmp_path / "out", "eval")
    with pytest.raises(WriteFailed, match="b.txt"):
        folder.write_text(tmp_path / "out" / "b.txt", "second\n")
    assert not (tmp_path / "out" / "b.txt").exists()  # no file its record does not prove


def test_a_torn_record_line_loses_no_later_line(tmp_path):
    out = claim(tmp_path / "out", "eval")
    out.write_text(tmp_path / "out" / "a.txt", "a\n")
    with open(tmp_path / "out" / RECORD, "a") as handle:
        handle.write('["half')  # a process killed in mid-append
    out = OutputFolder(tmp_path / "out", "eval")
    out.write_text(tmp_path / "out" / "b.txt", "b\n")
    again = OutputFolder(tmp_path / "out", "eval")
    assert again.problem(tmp_path / "out" / "a.txt") is None
    assert again.problem(tmp_path / "out" / "b.txt") is None
