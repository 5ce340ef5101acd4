"""The regression catalogue of hostile inputs (issue #22): names, values and files that once
deleted, replaced, exhausted memory, gave a silently wrong result or ended in a traceback.

Table-driven: each case is a command line over one shared tree of inputs (GT and prediction
folders, a finished ``sodkit eval`` output, crafted files) and states the exit code and the
words of its one error line; after it, every file of the tree has the bytes it had before (the
tree is hashed), so nothing was written, replaced or deleted. Commands run in this process
(``sodkit.cli.main``): the same code as the ``sodkit`` command, without an interpreter start
per case. The deeper tests of each class (memory caps in subprocesses, signals, real full
disks) are in the files docs/reliability.md names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from tests import hostile_files

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "<dir>" for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, trained) -> Path:
    """gt/ and pred/ (two masks each), ev/ (a finished eval output), crafted files, and a copy
    of the session's trained checkpoint whose stored config is edited per case."""
    root = tmp_path_factory.mktemp("hostile")
    for folder, value in (("gt", 255), ("pred", 180)):
        (root / folder).mkdir()
        for i in range(2):
            mask = np.zeros((20, 24), np.uint8)
            mask[4:12, 5 + i:15] = value
            cv2.imwrite(str(root / folder / f"a{i}.png"), mask)
    assert main(["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'pred'}", "--out",
                 str(root / "ev")]) == 0
    (root / "bomb").mkdir()  # a GT that claims 30000 x 30000 pixels in a few hundred bytes
    (root / "bomb" / "a0.png").write_bytes(hostile_files.zero_png(30000, 30000, inflated=64))
    (root / "laughs.yaml").write_text(hostile_files.billion_laughs())
    hostile_files.zip_bomb(root / "zipbomb.pt", unpacked=(1 << 32) - 1)
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    state["config"]["data"]["size"] = 60000
    torch.save(state, root / "huge_size.pt")
    state["config"]["data"]["size"] = 64
    state["config"]["data"]["std"] = [float("nan")] * 3
    torch.save(state, root / "nan_std.pt")
    cv2.imwrite(str(root / "photo.png"), np.full((40, 40, 3), 90, np.uint8))
    return root


def _eval(*extra: str) -> Callable[[Path], list[str]]:
    return lambda r: ["eval", "--gt", str(r / "gt"), "--pred", f"m={r / 'pred'}", "--out",
                      str(r / "new"), *extra]


def _named_gt(name: str) -> Callable[[Path], list[str]]:
    return lambda r: ["eval", "--gt", f"{name}={r / 'gt'}", "--gt", f"other={r / 'gt'}",
                      "--pred", f"m={r}", "--out", str(r / "new")]


def _report(*extra: str) -> Callable[[Path], list[str]]:
    return lambda r: ["report", str(r / "ev"), "--out", str(r / "new.html"), *extra]


def _train(*overrides: str) -> Callable[[Path], list[str]]:
    return lambda r: ["train", DEMO, f"output_root={r / 'runs'}", "name=r", *overrides]


def _predict(checkpoint: str, *extra: str) -> Callable[[Path], list[str]]:
    return lambda r: ["predict", "--checkpoint", str(r / checkpoint), "--out", str(r / "masks"),
                      str(r / "photo.png"), *extra]


# case -> (command line over the tree, exit code, words of the one error line)
CASES: dict[str, tuple[Callable[[Path], list[str]], int, str]] = {
    # names
    "run name ..": (_train("name=.."), 2, "name: '..' is not a valid name"),
    "dataset name .sodkit-run": (_train("data.test=[{preset: demo-test, name: .sodkit-run}]"),
                                 2, "data.test.0.name"),
    "dataset name results.json": (_train("data.test=[{preset: demo-test, name: results.json}]"),
                                  2, "data.test.0.name"),
    "eval --gt .sodkit-run=DIR": (_named_gt(".sodkit-run"), 2, "'.sodkit-run'"),
    "eval --gt results.json=DIR": (_named_gt("results.json"), 2, "'results.json'"),
    "eval --gt Evaluation.JSON=DIR": (_named_gt("Evaluation.JSON"), 2, "'Evaluation.JSON'"),
    "eval --gt pr.png=DIR": (_named_gt("pr.png"), 2, "'pr.png'"),
    "eval --pred ../x=DIR": (lambda r: ["eval", "--gt", str(r / "gt"), "--pred",
                                        f"../x={r / 'pred'}", "--out", str(r / "new")], 2,
                             "--pred"),
    # values
    "optim.lr=nan": (_train("optim.lr=nan"), 2, "optim.lr: must be"),
    "optim.backbone_lr_factor=-1": (_train("optim.backbone_lr_factor=-1"), 2,
                                    "optim.backbone_lr_factor: must be"),
    "optim.momentum=-1": (_train("optim.momentum=-1"), 2, "optim.momentum: must be in [0, 1)"),
    "optim.betas=[2, 0.999]": (_train("optim.betas=[2, 0.999]"), 2, "optim.betas"),
    "runtime.num_threads=-3": (_train("runtime.num_threads=-3"), 2, "runtime.num_threads"),
    "data.size=1": (_train("data.size=1"), 2, "data.size: must be in [16, 4096]"),
    "data.std=[0, 1, 1]": (_train("data.std=[0, 1, 1]"), 2, "data.std"),
    "train.checkpoint_minutes=inf": (_train("train.checkpoint_minutes=inf"), 2,
                                     "train.checkpoint_minutes"),
    "eval --decimals -1": (_eval("--decimals", "-1"), 2, "--decimals"),
    "eval --decimals 99 --latex": (lambda r: _eval("--decimals", "99", "--latex",
                                                   str(r / "t.tex"))(r), 2, "--decimals"),
    "eval --metrics FOO": (_eval("--metrics", "FOO"), 2, "--metrics: unknown FOO"),
    "eval --metrics MAE,FOO --latex": (lambda r: _eval("--metrics", "MAE,FOO", "--latex",
                                                       str(r / "t.tex"))(r), 2, "unknown FOO"),
    "report --decimals -1": (_report("--decimals", "-1"), 2, "--decimals"),
    "report --metrics FOO": (_report("--metrics", "FOO"), 2, "--metrics: unknown FOO"),
    "predict --batch-size 0": (_predict("nan_std.pt", "--batch-size", "0"), 2, "--batch-size"),
    # files
    "a checkpoint's stored data.size=60000": (_predict("huge_size.pt"), 2, "data.size"),
    "a checkpoint's stored data.std=NaN": (_predict("nan_std.pt"), 2, "data.std"),
    "a zip-bomb checkpoint": (_predict("zipbomb.pt"), 2, "zipbomb.pt"),
    "a billion laughs config": (lambda r: ["info", str(r / "laughs.yaml")], 2, "laughs.yaml"),
    "a GT claiming 900 megapixels": (lambda r: ["eval", "--gt", str(r / "bomb"), "--pred",
                                                f"m={r / 'pred'}", "--out", str(r / "new"),
                                                "--workers", "1"], 2, "SODKIT_MAX_PIXELS"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_input_is_one_line_and_changes_nothing(inputs, case, capsys):
    build, code, words = CASES[case]
    before = tree(inputs)
    try:
        got = main(build(inputs))
    except SystemExit as exc:  # argparse: a usage error from an option's type
        got = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert got == code, (case, err[-2000:])
    assert len(lines) == 1 and "Traceback" not in err, (case, err[-2000:])
    assert words in lines[0], (case, lines[0])
    assert tree(inputs) == before, case  # refused before any output: not even a folder
