"""``eval.metric`` by any result key, the optional families' too (#25): the checkpoint it keeps
is the best in the metric's direction (errors such as HCE, MSE and siMAE: the smallest), the
family it needs is computed without ``eval.compute`` naming it, and an unknown key is one line
listing the valid ones."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from sodkit.cli import main
from sodkit.config.schema import EvalCfg
from sodkit.engine.checkpoint import CheckpointManager
from sodkit.errors import ConfigError
from sodkit.metrics.families import FAMILIES
from sodkit.metrics.keys import families_with, lower_is_better, selectable_keys
from sodkit.report import ranking
from sodkit.torchfile import load_checkpoint
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]


def test_every_key_selects_checkpoints_the_way_tables_rank_it():
    errors = {"MAE", "maxBER", "meanBER", "adpBER", "HCE", "MSE", "siMAE",
              "SAD", "MattingMSE", "MAD", "Grad", "Conn", "Flicker"}
    assert {key for key in selectable_keys() if lower_is_better(key)} == errors
    for key in selectable_keys():
        if key == "Flicker":  # frames of videos: sodkit eval --groups only
            with pytest.raises(ConfigError, match="not during training"):
                CheckpointManager.check_selection(EvalCfg(metric=key), ["D"])
        else:
            CheckpointManager.check_selection(EvalCfg(metric=key), ["D"])  # accepted
        lower = CheckpointManager.is_better(1.0, {"value": 2.0}, key)
        assert lower == (key in errors) == ranking.lower_is_better(key), key
        assert CheckpointManager.is_better(3.0, {"value": 2.0}, key) != lower, key


def test_a_nan_score_picks_no_checkpoint_and_says_so(caplog):
    """mBA is NaN on a dataset with a GT without boundary (empty or full), as in BiRefNet."""
    assert not CheckpointManager.is_better(float("nan"), None, "mBA")
    assert "eval.metric mBA is nan: it picks no best.pt this time" in caplog.text


def test_the_metrics_family_is_computed_with_the_others():
    assert families_with(["mBA"], "HCE") == ("HCE", "mBA")  # registry order
    assert families_with([], "maxBIoU") == ("BIoU",)
    assert families_with(["all"], "maxFm") == tuple(n for n, f in FAMILIES.items()
                                                    if not f.reads_image and not f.sequence)


@pytest.mark.parametrize(("name", "meant"), [("hce", "HCE"), ("BIoU", "maxBIoU"),
                                             ("mba", "mBA"), ("maxF", "maxFm")])
def test_an_unknown_key_is_one_line_listing_the_valid_ones(name, meant):
    with pytest.raises(ConfigError) as error:
        CheckpointManager.check_selection(EvalCfg(metric=name), ["D"])
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"eval.metric: {name!r} is not one of [")
    assert message.endswith(f"; did you mean {meant!r}?")
    assert all(repr(key) in message for key in selectable_keys())


@pytest.mark.slow
def test_training_keeps_the_checkpoint_of_the_lowest_hce(data_root, tmp_path):
    """eval.metric HCE (an error, computed without eval.compute naming it) over three
    evaluations (the starting model's and two epochs'): best.pt is the one with the smallest
    HCE; the run's files hold the families, per image too."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    overrides = [*tiny_overrides(data_root, tmp_path, "hce"), "eval.metric=HCE",
                 "eval.compute=[mBA]", "eval.at_start=true"]
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0
    run = tmp_path / "hce"
    events = EventAccumulator(str(run / "tb"), size_guidance={"scalars": 0})
    events.Reload()
    values = [event.value for event in events.Scalars("eval/DUTS-TE/HCE")]
    assert len(values) == 3 and min(values) < max(values), values  # the direction matters
    best = load_checkpoint(run / "checkpoints" / "best.pt")["best"]
    assert best["metric"] == "HCE" and best["epoch"] == values.index(min(values))
    assert best["value"] == pytest.approx(min(values), rel=1e-6)  # tensorboard keeps float32
    results = json.loads((run / "results.json").read_text())["DUTS-TE"]
    assert {"HCE", "mBA"} <= set(results) and "maxBIoU" not in results
    with open(run / "results_per_image.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and all(float(row["HCE"]) >= 0 and row["mBA"] for row in rows)
    log = (run / "train.log").read_text()  # the log lines show the families after the five
    assert re.search(r"epoch 0 \(the starting model\): DUTS-TE: MAE [\d.]+, .*maxEm [\d.]+, "
                     r"HCE [\d.]+, mBA ([\d.]+|nan)\n", log), log[-2000:]
    assert re.search(r"INFO DUTS-TE: MAE [\d.]+, .*maxEm [\d.]+, HCE [\d.]+, mBA", log)
