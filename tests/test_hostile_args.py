"""Arguments and names that once ended in a traceback, or after the work: each is one line
naming the option or key, before anything is measured or written (docs/reliability.md,
section 9). Table-driven: every case states the command, the words of its line and that the
tree is byte for byte as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """gt/ and pred/ (two masks each), a finished eval output ev/, and a demo recipe's data."""
    root = tmp_path_factory.mktemp("hostile")
    for folder, value in (("gt", 255), ("pred", 180)):
        (root / folder).mkdir()
        for i in range(2):
            mask = np.zeros((20, 24), np.uint8)
            mask[4:12, 5 + i:15] = value
            cv2.imwrite(str(root / folder / f"a{i}.png"), mask)
    proc = run("eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'pred'}", "--out",
               str(root / "ev"))
    assert proc.returncode == 0, proc.stderr
    return root


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sodkit", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def _eval(root: Path, *extra: str) -> list[str]:
    return ["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'pred'}", "--out",
            str(root / "new"), *extra]


def _named_gt(name: str):
    def args(root: Path) -> list[str]:
        return ["eval", "--gt", f"{name}={root / 'gt'}", "--gt", f"other={root / 'gt'}",
                "--pred", f"m={root}", "--out", str(root / "new")]
    return args


def _report(*extra: str):
    def args(root: Path) -> list[str]:
        return ["report", str(root / "ev"), "--out", str(root / "new.html"), *extra]
    return args


def _config(name: str):
    def args(root: Path) -> list[str]:
        return ["train", str(DEMO), f"output_root={root / 'runs'}", "name=r",
                f"data.test=[{{preset: demo-test, name: '{name}'}}]"]
    return args


CASES = {
    "eval --decimals -1": (lambda r: _eval(r, "--decimals", "-1"), "--decimals -1"),
    "eval --decimals 99": (lambda r: _eval(r, "--decimals", "99", "--latex",
                                           str(r / "t.tex")), "--decimals 99"),
    "eval --metrics FOO": (lambda r: _eval(r, "--metrics", "FOO"), "--metrics: unknown FOO"),
    "eval --metrics with --xlsx": (lambda r: _eval(r, "--metrics", "MAE,FOO", "--latex",
                                                   str(r / "t.tex")), "unknown FOO"),
    "report --decimals -1": (_report("--decimals", "-1"), "--decimals -1"),
    "report --metrics FOO": (_report("--metrics", "FOO"), "--metrics: unknown FOO"),
    "eval --gt .sodkit-run=DIR": (_named_gt(".sodkit-run"), "'.sodkit-run'"),
    "eval --gt results.json=DIR": (_named_gt("results.json"), "'results.json'"),
    "eval --gt Evaluation.JSON=DIR": (_named_gt("Evaluation.JSON"), "'Evaluation.JSON'"),
    "eval --gt pr.png=DIR": (_named_gt("pr.png"), "'pr.png'"),
    "train data.test name .sodkit-run": (_config(".sodkit-run"), "data.test.0.name"),
    "train data.test name results.json": (_config("results.json"), "data.test.0.name"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_argument_is_one_line_before_any_work(inputs, case):
    build, words = CASES[case]
    before = snapshot(inputs)
    proc = run(*build(inputs))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert words in errors[0], errors[0]
    assert snapshot(inputs) == before  # nothing measured into a folder, nothing written
