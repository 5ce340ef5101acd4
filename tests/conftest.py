"""Fixtures shared by the end-to-end test modules: one small dataset and one trained run."""

from __future__ import annotations

from pathlib import Path

import pytest

from sodkit.cli import main
from tests.sod_fixtures import tiny_overrides, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    return write_duts_layout(tmp_path_factory.mktemp("sod"))


@pytest.fixture(scope="session")
def trained(data_root, tmp_path_factory) -> Path:
    """A finished 2-epoch run folder (checkpoints, predictions, results); read, never modify."""
    out = tmp_path_factory.mktemp("runs")
    overrides = tiny_overrides(data_root, out, "t")
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0
    return out / "t"
