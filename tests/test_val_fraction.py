"""``data.val_fraction``: a deterministic share of the training pairs held out as the test set
``val``, chosen by a hash of the stem (the same pairs whatever files are added)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sodkit.cli import main
from sodkit.config import ConfigError, load_config
from sodkit.data.holdout import split_pairs
from sodkit.data.pairs import Pair
from sodkit.errors import DataError
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def _pairs(stems: list[str]) -> list[Pair]:
    return [Pair(s, Path(f"{s}.jpg"), Path(f"{s}.png")) for s in stems]


def test_the_split_is_stable_when_files_are_added_and_near_the_fraction():
    first = _pairs([f"img_{i:04d}" for i in range(1000)])
    train, val = split_pairs(first, 0.2)
    assert 150 < len(val) < 250 and len(train) + len(val) == 1000
    assert not {p.stem for p in train} & {p.stem for p in val}
    more = _pairs([f"new_{i:04d}" for i in range(500)]) + first
    train2, val2 = split_pairs(more, 0.2)
    old = {p.stem for p in first}
    assert {p.stem for p in val2} & old == {p.stem for p in val}  # no old pair moved
    assert split_pairs(first, 0.2) == (train, val)  # deterministic
    assert split_pairs(first, None) == (first, [])


def test_a_set_too_small_to_hold_out_a_pair_is_a_clear_error():
    with pytest.raises(DataError, match=r"data.val_fraction=0.01: none of the 3 training pairs "
                                        r"is held out .*too small"):
        split_pairs(_pairs(["a", "b", "c"]), 0.01)
    with pytest.raises(DataError, match=r"holds out all 1 training pairs"):
        split_pairs(_pairs(["x"]), 0.999999)


@pytest.mark.parametrize("value", ["0", "1", "-0.1", "1.5"])
def test_the_fraction_must_lie_strictly_between_0_and_1(value):
    with pytest.raises(ConfigError, match=r"data.val_fraction: must be"):
        load_config(DEMO, [f"data.val_fraction={value}"])


@pytest.mark.slow
def test_a_run_evaluates_the_held_out_pairs_as_val_and_picks_best_by_them(data_root, tmp_path,
                                                                         caplog):
    overrides = [*tiny_overrides(data_root, tmp_path, "v", epochs=1), "data.test=[]",
                 "data.val_fraction=0.25", "eval.metric_dataset=val"]
    assert main(["train", DEMO, *overrides]) == 0
    assert "test set val: 4 of the 16 training pairs held out" in caplog.text
    stems = [p.stem for p in (data_root / "DUTS-TR" / "DUTS-TR-Image").glob("*.jpg")]
    _, val = split_pairs(_pairs(sorted(stems)), 0.25)
    folder = tmp_path / "v"
    assert list(json.loads((folder / "results.json").read_text())) == ["val"]
    assert sorted(p.stem for p in (folder / "predictions" / "val").glob("*.png")) == \
        [p.stem for p in val]
    log = (folder / "train.log").read_text()
    assert len(val) == 4 and (folder / "checkpoints" / "best.pt").is_file()  # picked by val
    assert f"train images {16 - len(val)}," in log and f"test sets: val: {len(val)}" in log
