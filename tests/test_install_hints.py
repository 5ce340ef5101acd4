"""The command that installs an extra, said right for the installation (#33): the hints said
``pip install 'sodkit[report]'`` where the README (a clone) says ``pip install -e '.[report]'``.
A clone (its package beside its ``pyproject.toml``, as ``make`` installs it) gets ``pip install
-e '<clone>[extra]'`` (``.`` in the clone itself), a wheel in ``site-packages`` gets ``pip
install 'sodkit[extra]'``; the README gives both."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.extras import install_hint

ROOT = Path(__file__).resolve().parents[1]


def test_a_wheel_and_a_clone_get_their_own_command(tmp_path, monkeypatch):
    clone = tmp_path / "my clone"
    (clone / "sodkit").mkdir(parents=True)
    (clone / "pyproject.toml").write_text("[project]\nname = 'sodkit'\n")
    assert install_hint("report", clone) == f"pip install -e '{clone}[report]'"
    monkeypatch.chdir(clone)
    assert install_hint("report", clone) == "pip install -e '.[report]'"
    wheel = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    (wheel / "sodkit").mkdir(parents=True)
    assert install_hint("metrics", wheel) == "pip install 'sodkit[metrics]'"


def test_xlsx_without_openpyxl_says_the_command_for_this_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # as if it were not installed
    monkeypatch.chdir(ROOT)
    (tmp_path / "gt").mkdir()
    assert cv2.imwrite(str(tmp_path / "gt" / "a.png"), np.zeros((4, 4), np.uint8))
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "gt"),
                 "--out", str(tmp_path / "out"), "--xlsx", str(tmp_path / "t.xlsx")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == ("sodkit eval: error: --xlsx needs openpyxl, which is not installed: "
                       "pip install -e '.[report]'")  # this suite runs in its clone
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'sodkit[report]'" in readme and "pip install -e '.[report]'" in readme


@pytest.mark.parametrize("extra", ["report", "metrics"])
def test_every_hint_names_an_extra_of_the_project(extra):
    assert f"\n{extra} = [" in (ROOT / "pyproject.toml").read_text()
