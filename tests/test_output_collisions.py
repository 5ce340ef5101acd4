"""Two outputs, one path (#32): a command's outputs are checked against each other, against the
files it writes into its own folder (and the record and marker beside them) and against its
inputs, before any work. Each case is one line on stderr, exit 2, and every file keeps its
bytes (``eval --latex EV/results.md`` replaced eval's own table; ``--latex t.tex --xlsx t.tex``
left a workbook named .tex)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """gt/, a/, b/, p/D1/, p/D2/ (4 pairs), images/, an eval output ev/ of a and b, a style file,
    a stem list, a methods file, a table of the user's and a hard link to it."""
    root = tmp_path_factory.mktemp("collide")
    rng = np.random.default_rng(2)
    for i in range(4):
        pred, gt = realistic_pair(rng, 24, 30)
        for name, image in (("gt", gt), ("a", pred), ("b", 255 - pred), ("p/D1", pred),
                            ("p/D2", pred), ("images", np.dstack([pred] * 3))):
            (root / name).mkdir(parents=True, exist_ok=True)
            assert cv2.imwrite(str(root / name / f"im{i}.png"), image)
    (root / "methods.yaml").write_text("methods: [{name: a, folder: a}]\n")
    (root / "datasets.json").write_text('{"D1": {"mask": {"path": "gt", "suffix": ".png"}}}')
    (root / "stems.txt").write_text("im0\nim1\n")
    (root / "style.yaml").write_text("dpi: 60\nformats: [png]\n")
    (root / "mine.tex").write_text("% my own table\n")
    os.link(root / "mine.tex", root / "also_mine.tex")
    assert main(["eval", "--gt", str(root / "gt"), "--pred", str(root / "a"), "--pred",
                 str(root / "b"), "--out", str(root / "ev")]) == 0
    return root


EVAL = ["eval", "--gt", "{r}/gt", "--pred", "{r}/a", "--out", "{r}/ev"]
REPORT = ["report", "{r}/ev", "--out", "{r}/page.html"]


@pytest.mark.parametrize("args, words", [
    (EVAL + ["--latex", "{r}/ev/results.md"], "--out {r}/ev's results.md"),
    (EVAL + ["--latex", "{r}/ev/results.md", "--force"], "the same file"),
    (EVAL + ["--xlsx", "{r}/ev/curves.json", "--force"], "--out {r}/ev's curves.json"),
    (EVAL + ["--latex", "{r}/t.tex", "--xlsx", "{r}/t.tex"], "--xlsx {r}/t.tex and --latex"),
    (EVAL + ["--latex", "{r}/mine.tex", "--xlsx", "{r}/also_mine.tex", "--force"],
     "the same file"),
    (EVAL + ["--latex", "{r}/ev/.sodkit-files", "--force"], "sodkit's record"),
    (EVAL + ["--latex", "{r}/new/.sodkit-run"], "sodkit's marker"),
    (["eval", "--gt", "D1={r}/gt", "--gt", "D2={r}/gt", "--pred", "a={r}/p", "--out", "{r}/ev2",
      "--latex", "{r}/ev2/D1"], "the folder --out {r}/ev2 writes D1's"),
    (["eval", "--gt", "{r}/gt", "--methods", "{r}/methods.yaml", "--out", "{r}/ev",
      "--latex", "{r}/methods.yaml", "--force"], "is the input {r}/methods.yaml"),
    (EVAL + ["--list", "{r}/stems.txt", "--xlsx", "{r}/stems.txt", "--force"],
     "is the input {r}/stems.txt"),
    (["eval", "--datasets", "{r}/datasets.json", "--pred", "a={r}/p", "--out", "{r}/ev2",
      "--latex", "{r}/datasets.json", "--force"], "is the input {r}/datasets.json"),
    (["eval", "--gt", "{r}/gt", "--pred", "{r}/a", "--out", "{r}/images/ev", "--compute",
      "CCM", "--images", "{r}/images"], "lies inside the input {r}/images"),
    (REPORT + ["--latex", "{r}/page.html"], "--latex {r}/page.html and --out {r}/page.html"),
    (REPORT + ["--figures", "{r}/figs", "--out", "{r}/figs/pr.pdf", "--force"],
     "--figures {r}/figs's pr.pdf"),
    (REPORT + ["--figures", "{r}/page.html"], "the folder --figures writes into"),
    (REPORT + ["--figures", "{r}/figs", "--figure-style", "{r}/style.yaml", "--xlsx",
               "{r}/style.yaml", "--force"], "is the input {r}/style.yaml"),
])
def test_two_outputs_at_one_path_are_refused_before_any_work(tree, capsys, args, words):
    before = snapshot(tree)
    code = main([a.format(r=tree) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith("sodkit ") and words.format(r=tree) in err[-1], err[-1]
    assert snapshot(tree) == before
    assert not (tree / "new").exists() and not (tree / "ev2").exists()
    assert not (tree / "figs").exists() and not (tree / "page.html").exists()


def test_outputs_at_distinct_paths_beside_each_other_are_written(tree, capsys):
    """The check refuses only real collisions: a table inside eval's own folder, the page in
    the figures folder."""
    assert main([a.format(r=tree) for a in EVAL] + [
        "--latex", str(tree / "ev" / "table.tex"), "--xlsx", str(tree / "ev" / "table.xlsx")]) == 0
    assert main([a.format(r=tree) for a in REPORT[:2]] + [
        "--out", str(tree / "figs" / "page.html"), "--figures", str(tree / "figs"),
        "--figure-style", str(tree / "style.yaml")]) == 0
    assert (tree / "ev" / "table.tex").exists() and (tree / "figs" / "pr.png").exists()
