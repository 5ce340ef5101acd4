"""``~`` in a path the user gives is the home folder, for outputs as for inputs: never a folder
named ``~`` in the current one (``output_root=~/runs``, ``--out=~/x``, which no shell expands)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sodkit.cli import main, parse_args
from sodkit.commands._common import run_dir_of
from sodkit.config import load_config, save_config
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home folder, and a working folder apart from it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "home"


def test_config_paths_expand_the_home_folder(home: Path, tmp_path: Path) -> None:
    cfg = load_config(DEMO, ["output_root=~/runs", "data_root=~/data"])
    assert (cfg.output_root, cfg.data_root) == (str(home / "runs"), str(home / "data"))
    assert run_dir_of(cfg) == home / "runs" / "demo"
    save_config(cfg, tmp_path / "resolved.yaml")  # what a run folder's config.yaml holds
    assert load_config(tmp_path / "resolved.yaml").output_root == str(home / "runs")


OUTPUTS = [  # a command line with every output option given as --option=~/...
    (["predict", "--checkpoint", "c.pt", "in", "--out=~/masks"], {"out": "masks"}),
    (["test", "c.yaml", "--checkpoint", "c.pt", "--out=~/ev"], {"out": "ev"}),
    (["eval", "--gt", "g", "--pred", "p", "--out=~/ev", "--latex=~/t.tex", "--xlsx=~/t.xlsx"],
     {"out": "ev", "latex": "t.tex", "xlsx": "t.xlsx"}),
    (["report", "run", "--out=~/r.html", "--latex=~/t.tex", "--xlsx=~/t.xlsx"],
     {"out": "r.html", "latex": "t.tex", "xlsx": "t.xlsx"}),
    (["export", "--checkpoint", "c.pt", "--onnx=~/m.onnx"], {"onnx": "m.onnx"}),
    (["bench", "speed", "c.yaml", "--json=~/b.json"], {"json": "b.json"}),
]


@pytest.mark.parametrize(("argv", "expected"), OUTPUTS, ids=[a[0] for a, _ in OUTPUTS])
def test_every_output_option_expands_the_home_folder(home: Path, argv, expected) -> None:
    args = parse_args(argv)
    for attr, name in expected.items():
        assert getattr(args, attr) == str(home / name), attr


def test_predict_and_test_write_into_the_home_folder(home: Path, trained: Path,
                                                      data_root: Path, tmp_path: Path) -> None:
    """Real commands: nothing appears under the working folder, everything under home."""
    import cv2

    work = tmp_path / "work"
    cv2.imwrite(str(work / "cat.jpg"), np.full((40, 50, 3), 90, np.uint8))
    ckpt = str(trained / "checkpoints" / "last.pt")
    assert main(["predict", "--checkpoint", ckpt, "--out=~/masks", "--workers", "0",
                 str(work / "cat.jpg")]) == 0
    assert (home / "masks" / "cat.png").is_file()
    overrides = [o for o in tiny_overrides(data_root, tmp_path, "t")
                 if not o.startswith("output_root=")]
    assert main(["test", DEMO, *overrides, "output_root=~/runs", "--checkpoint", ckpt]) == 0
    assert (home / "runs" / "t" / "eval" / "last" / "results.json").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["cat.jpg"]
