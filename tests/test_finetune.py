"""Fine-tuning from the command line (issue #23, acceptance "Fine-tuning start"): a run started
with ``model.init_from`` and ``eval.at_start`` reports the source run's numbers at its start and
its own after training; a source that does not fit ends the command before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config import Config, ModelCfg, to_dict
from sodkit.model_file import file_sha256
from sodkit.network import build_network
from tests.sod_fixtures import TINY_BACKBONE, draw_pair, tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def test_a_minet_checkpoint_into_fpn_exits_2_naming_the_counts(data_root, tmp_path, capsys):
    cfg = Config()
    cfg.model = ModelCfg(name="minet", backbone="resnet18", decoder_channels=16)
    source = tmp_path / "minet.pt"
    torch.save({"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)}, source)
    out = tmp_path / "out"
    code = main(["train", DEMO, *tiny_overrides(data_root, out, "ft"),
                 f"model.init_from={source}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"sodkit train: error: model.init_from: {source} does not fit "
                             f"this network: ")
    for words in (" missing from the file (", " unexpected, not in this network (",
                  "model.name 'minet' -> 'fpn'", "model.init_exclude=["):
        assert words in err[0], words
    assert not out.exists()  # nothing written: no run folder


def write_folder(root: Path, count: int, seed: int) -> Path:
    """A user's folder: ``images/`` and ``masks/`` paired by stem (the recipe's layout)."""
    rng = np.random.default_rng(seed)
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for i in range(count):
        image, mask = draw_pair(rng, int(rng.integers(48, 97)), int(rng.integers(48, 97)))
        cv2.imwrite(str(root / "images" / f"photo_{i:03d}.jpg"), image)
        cv2.imwrite(str(root / "masks" / f"photo_{i:03d}.png"), mask)
    return root


@pytest.mark.slow
def test_a_finetuning_run_starts_at_the_source_numbers_then_has_its_own(trained, data_root,
                                                                         tmp_path):
    """configs/finetune_custom.yaml on a folder of 12 pairs, from the trained fixture's best.pt
    (the network and test settings of tiny_overrides: its numbers are comparable)."""
    best = trained / "checkpoints" / "best.pt"
    source = json.loads((trained / "results.json").read_text())
    # results.json is the final epoch's; best.pt holds the same weights when it is the best
    assert torch.load(trained / "checkpoints" / "last.pt", weights_only=True)["best"]["epoch"] \
        == 2
    mine = write_folder(tmp_path / "mine", 12, seed=7)
    run = [str(ROOT / "configs" / "finetune_custom.yaml"), f"data_root={mine}",
           f"output_root={tmp_path}", "name=ft",
           f"data.test=[{{preset: duts-te, root: {data_root / 'DUTS-TE'}}}]",
           "data.size=64", "data.batch_size=4", "data.test_batch_size=4", "data.num_workers=0",
           "data.val_fraction=0.3", f"model.backbone={TINY_BACKBONE}",
           "model.decoder_channels=16", "train.epochs=1",
           f"model.init_from={best}"]
    assert main(["train", *run]) == 0
    folder = tmp_path / "ft"
    start = json.loads((folder / "results_start.json").read_text())
    assert set(start) == {"DUTS-TE", "val"} and set(source) == {"DUTS-TE"}
    for metric, value in source["DUTS-TE"].items():
        assert start["DUTS-TE"][metric] == pytest.approx(value, abs=1e-6), metric
    tuned = json.loads((folder / "results.json").read_text())
    assert set(tuned) == {"DUTS-TE", "val"}
    assert tuned["DUTS-TE"]["MAE"] != start["DUTS-TE"]["MAE"]  # its own numbers
    state = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)
    assert state["init"]["file"] == str(best) and state["init"]["fresh"] == 0
    assert state["init"]["sha256"] == file_sha256(best) and state["epoch"] == 1
    log = (folder / "train.log").read_text()
    assert f"model.init_from: {state['init']['loaded']} tensors loaded from {best} " \
           f"(checkpoint, its" in log and file_sha256(best) in log
    assert "epoch 0 (the starting model): DUTS-TE: MAE " in log
    page = (folder / "report.html").read_text()
    assert 'id="results-start"' in page and "The starting model (epoch 0" in page
    assert "Initialised from (model.init_from)" in page and file_sha256(best) in page
    # a resume keeps the run's own state (here: a finished run) and says, once and in the past
    # tense, what the run's start loaded (#33: "is not loaded", then "574 tensors loaded")
    assert main(["train", *run, "--resume", "auto"]) == 0
    log = (folder / "train.log").read_text()
    loaded = state["init"]["loaded"]
    assert log.count("model.init_from is not loaded: a resumed run continues from its own") == 1
    assert log.count(f"{loaded} tensors were loaded from {best}") == 1  # said in the past
    assert log.count(f"{loaded} tensors loaded from") == 1  # the first run's own line only


def test_the_recipe_fits_the_demo_model_it_documents():
    """configs/finetune_custom.yaml starts from output/demo/checkpoints/best.pt by default: its
    network must be the demo's, tensor for tensor, or the documented pipeline fails."""
    from sodkit.config import load_config
    from sodkit.engine.init_from import mismatch

    demo = build_network(load_config(DEMO).model).state_dict()
    recipe = load_config(ROOT / "configs" / "finetune_custom.yaml")
    assert recipe.model.init_from == "output/demo/checkpoints/best.pt"
    mine = build_network(recipe.model).state_dict()
    assert mismatch(mine, demo, []) == {"missing": [], "unexpected": [], "shape": []}
    assert recipe.eval.at_start and recipe.eval.metric_dataset == "val"
