"""``sodkit eval``'s selection (#25): ``--include/--exclude-{methods,datasets}``, ``--list FILE``
(a hostile file: bounded, decoded, each stem checked) and ``--allow-missing`` (each method on the
stems it has, equal to PySODMetrics on those pairs; a method without a dataset skipped)."""

from __future__ import annotations

import csv
import json
import logging
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.evaluation.selection import MAX_LIST_BYTES
from sodkit.metrics.testing import realistic_pair
from tests.metrics_fixtures import assert_matches_reference, reference_metrics

SIZES = [(40, 50), (36, 36), (41, 30), (30, 44), (33, 38)]


def write_png(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), array)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """gt/ (img0..img4); preds/<method>/<dataset>/ for methods a, b, c and datasets D1, D2."""
    rng = np.random.default_rng(5)
    for i, (h, w) in enumerate(SIZES):
        pred, gt = realistic_pair(rng, h, w)
        write_png(tmp_path / "gt" / f"img{i}.png", gt)
        for k, method in enumerate("abc"):
            for dataset in ("D1", "D2"):
                write_png(tmp_path / "preds" / method / dataset / f"img{i}.png",
                          np.roll(pred, k, axis=1))
    return tmp_path


def run_eval(root: Path, *extra: str, datasets=("D1", "D2"), methods="abc",
             out: str = "out") -> int:
    args = ["eval", "--out", str(root / out)]
    args += [x for d in datasets for x in ("--gt", f"{d}={root / 'gt'}")]
    args += [x for m in methods for x in ("--pred", f"{m}={root / 'preds' / m}")]
    return main(args + list(extra))


def reference(root: Path, method: str, stems: list[str]) -> dict:
    pairs = [(cv2.imread(str(root / "preds" / method / "D1" / f"{s}.png"), 0),
              cv2.imread(str(root / "gt" / f"{s}.png"), 0)) for s in stems]
    return {k: v for k, v in reference_metrics(pairs).items() if not k.endswith("_curve")}


def per_image_stems(path: Path, method: str) -> list[str]:
    with open(path, newline="") as handle:
        return [row["stem"] for row in csv.DictReader(handle) if row["method"] == method]


def test_include_and_exclude_pick_methods_and_datasets(root):
    code = run_eval(root, "--include-methods", "a,b", "--exclude-methods", "b",
                    "--exclude-datasets", "D2")
    assert code == 0
    out = root / "out"
    assert list(json.loads((out / "D1" / "results.json").read_text())) == ["a"]
    assert not (out / "D2").exists()
    manifest = json.loads((out / "evaluation.json").read_text())
    assert list(manifest["datasets"]) == ["D1"]
    code = run_eval(root, "--include-datasets", "D2", "--include-methods", "c", "--force")
    assert code == 0
    assert list(json.loads((out / "D2" / "results.json").read_text())) == ["c"]


def test_unknown_or_empty_selection_is_one_line(root, capsys):
    assert run_eval(root, "--include-methods", "a,zz") == 2
    err = capsys.readouterr().err
    assert "--include-methods zz: no such method; known: a, b, c" in err
    assert run_eval(root, "--exclude-datasets", "D1,D2") == 2
    assert "leave no dataset" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:  # argparse's usage error
        run_eval(root, "--include-methods", "a,,b")
    assert stop.value.code == 2 and "no empty name" in capsys.readouterr().err
    assert not (root / "out").exists()


@pytest.mark.parametrize("workers", ["1", "2"])  # in this process, and in worker processes
def test_allow_missing_evaluates_each_method_on_what_it_has(root, caplog, capsys, workers):
    for stem in ("img1", "img3"):
        (root / "preds" / "a" / "D1" / f"{stem}.png").unlink()
    assert run_eval(root, datasets=("D1",), methods="ab") == 2
    assert "(--allow-missing evaluates the others)" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING):
        code = run_eval(root, "--allow-missing", "--workers", workers, datasets=("D1",),
                        methods="ab")
    assert code == 0
    assert "method 'a': 2 of 5 predictions missing for dataset D1; evaluated on the 3" \
        in caplog.text
    results = json.loads((root / "out" / "D1" / "results.json").read_text())
    assert_matches_reference(results["a"], reference(root, "a", ["img0", "img2", "img4"]))
    assert_matches_reference(results["b"], reference(root, "b", [f"img{i}" for i in range(5)]))
    rows = root / "out" / "D1" / "results_per_image.csv"
    assert per_image_stems(rows, "a") == ["img0", "img2", "img4"]
    assert per_image_stems(rows, "b") == [f"img{i}" for i in range(5)]


def test_allow_missing_merges_exactly_across_processes(root):
    """A method's gaps leave empty runs in some worker tasks: the merged files are the bytes of
    one process's."""
    for stem in ("img0", "img3", "img4"):
        (root / "preds" / "b" / "D1" / f"{stem}.png").unlink()
    for workers in ("1", "2"):
        assert run_eval(root, "--allow-missing", "--workers", workers, datasets=("D1",),
                        methods="ab", out=f"out{workers}") == 0
    for name in ("results.json", "curves.json"):
        assert (root / "out1" / "D1" / name).read_bytes() == (
            root / "out2" / "D1" / name).read_bytes()
    rows = [(root / f"out{w}" / "D1" / "results_per_image.csv").read_text().splitlines()
            for w in ("1", "2")]
    assert rows[0] == rows[1] and len(rows[0]) == 1 + 5 + 2


def test_allow_missing_skips_a_method_without_the_dataset(root, caplog, capsys):
    for path in (root / "preds" / "b" / "D2").iterdir():
        path.unlink()
    for path in (root / "preds" / "c" / "D2").iterdir():
        path.unlink()
    (root / "preds" / "c" / "D2").rmdir()
    assert run_eval(root) == 2
    assert "method 'b': 5 of 5 predictions missing" in capsys.readouterr().err
    with caplog.at_level(logging.WARNING):
        assert run_eval(root, "--allow-missing") == 0
    assert "method 'b': no prediction for dataset D2" in caplog.text
    assert "method 'c': no folder for dataset D2" in caplog.text
    out = root / "out"
    assert list(json.loads((out / "D2" / "results.json").read_text())) == ["a"]
    assert list(json.loads((out / "D1" / "results.json").read_text())) == ["a", "b", "c"]
    assert list(json.loads((out / "results.json").read_text())) == [
        "D1/a", "D1/b", "D1/c", "D2/a"]


def test_list_evaluates_the_listed_stems(root, caplog):
    listing = root / "test.lst"
    listing.write_text("# the subset\nimg4.png\nDUTS-Image/img0.jpg DUTS-Mask/img0.png\n\n"
                       "img2\nimg4\n", encoding="utf-8")
    with caplog.at_level(logging.INFO):
        code = run_eval(root, "--list", f"D1={listing}", methods="a")
    assert code == 0
    assert "dataset D1: 3 of 5 GT images listed by --list" in caplog.text
    d1 = json.loads((root / "out" / "D1" / "results.json").read_text())
    assert_matches_reference(d1["a"], reference(root, "a", ["img0", "img2", "img4"]))
    assert per_image_stems(root / "out" / "D1" / "results_per_image.csv", "a") == [
        "img0", "img2", "img4"]
    assert per_image_stems(root / "out" / "D2" / "results_per_image.csv", "a") == [
        f"img{i}" for i in range(5)]  # D2 has no list: evaluated whole


@pytest.mark.parametrize("content, message", [
    (b"img0\n\xff\xfe\x00garbage\n", "line 2 is not UTF-8 text"),
    (b"img0\nim\x07g1\n", "line 2 names no file stem"),
    (b"img0\n..\n", "line 2 names no file stem"),
    (b"img0\nsub/\n", "line 2 names no file stem"),
    (b"x" * 300 + b"\n", "line 1 names no file stem"),
    (b"# only a comment\n\n", "lists no stem"),
    (b"img0\nnot_a_gt\n", "1 listed stem(s) have no GT in dataset D1: not_a_gt"),
])
def test_a_bad_list_is_one_line_before_any_work(root, capsys, content, message):
    listing = root / "bad.lst"
    listing.write_bytes(content)
    assert run_eval(root, "--list", f"D1={listing}", methods="a") == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (root / "out").exists()


def test_a_huge_or_unnamed_list_is_refused(root, capsys):
    huge = root / "huge.lst"
    with open(huge, "wb") as handle:  # sparse: says 32 MiB + 1 without the disk space
        handle.truncate(MAX_LIST_BYTES + 1)
    assert os.path.getsize(huge) > MAX_LIST_BYTES
    assert run_eval(root, "--list", f"D1={huge}", methods="a") == 2
    assert "more than a list of stems needs" in capsys.readouterr().err
    small = root / "ok.lst"
    small.write_text("img0\n")
    assert run_eval(root, "--list", str(small), methods="a") == 2
    assert "name the dataset it lists: --list NAME=FILE" in capsys.readouterr().err
