"""A model file is its own fine-tuning recipe (issue #36, item 4): ``sodkit train MODEL
data_root=DIR`` trains the file's architecture with its preprocessing and training sections,
``model.init_from`` set to it, the datasets and evaluation of ``configs/finetune_custom.yaml``;
``sodkit info --json MODEL`` shows that config. Imported releases (BiRefNet Swin-T, MINet-R50)
are made from random weights in the authors' names, as the import tests make them.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

from sodkit.cli import main
from sodkit.model_file import read_model_file
from tests.test_finetune import write_folder
from tests.test_import_weights import save_legacy, synthetic

HERE = Path(__file__).parent
ROOT = HERE.parent
SMALL = ["data.size=64", "data.batch_size=2", "data.test_batch_size=2", "data.num_workers=0",
         "train.epochs=1", "train.steps_per_epoch=2", "eval.at_start=false",
         "data.val_fraction=0.25", "runtime.precision=fp32"]  # a run of seconds


def info_config(capsys, *argv: str) -> dict:
    capsys.readouterr()  # what came before
    assert main(["info", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)["config"]


def test_info_shows_the_recipe_a_model_file_makes(trained, tmp_path, capsys):
    """A model file exported from a training run: the run's network, preprocessing, loss,
    optimizer, schedule and epochs; finetune_custom.yaml's datasets and evaluation; nothing
    of the stored config that names a folder; the user's overrides on top."""
    model = tmp_path / "my model.safetensors"
    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "best.pt"),
                 "--model", str(model)]) == 0
    stored = read_model_file(model)["config"]
    config = info_config(capsys, str(model), "data_root=/data/mine", "optim.lr=0.0005")
    assert config["model"] == {**stored["model"], "init_from": str(model.absolute()),
                               "pretrained": None, "init_weights": "ema", "init_exclude": []}
    for section in ("loss", "schedule", "train"):
        assert config[section] == stored[section], section
    assert config["optim"] == {**stored["optim"], "lr": 0.0005}
    assert config["data"]["size"] == stored["data"]["size"] == 64
    finetune = yaml.safe_load((ROOT / "configs" / "finetune_custom.yaml").read_text())
    assert config["data"]["train"] == [{**finetune["data"]["train"][0], "preset": None,
                                        "list_file": None, "trimap_dir": ""}]
    assert config["data"]["test"] == [] and config["data"]["val_fraction"] == 0.1
    assert config["eval"]["metric_dataset"] == "val" and config["eval"]["at_start"]
    assert stored["data_root"] != "/data/mine" and config["data_root"] == "/data/mine"
    assert config["output_root"] == "output" and config["name"] == "finetune_my model"


def test_a_finished_resume_says_init_from_is_not_loaded_and_nothing_else(trained, tmp_path):
    """``--resume auto`` of a finished fine-tuning run: one line that init_from is not loaded,
    and no "tensors loaded" line in that run's log (before, it said both)."""
    model = tmp_path / "m.safetensors"
    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "best.pt"),
                 "--model", str(model)]) == 0
    mine = write_folder(tmp_path / "mine", 8, seed=3)
    run = ["train", str(model), f"data_root={mine}", f"output_root={tmp_path}", *SMALL,
           "train.ema_decay=null"]
    assert main(run) == 0
    log = (tmp_path / "finetune_m" / "train.log").read_text()
    assert f"tensors loaded from {model.absolute()}" in log
    assert main([*run, "--resume", "auto"]) == 0
    resumed = (tmp_path / "finetune_m" / "train.log").read_text()[len(log):]
    assert "resumed from" in resumed and "tensors loaded" not in resumed
    assert resumed.count("model.init_from is not loaded: a resumed run continues from its own "
                         f"checkpoint (the run started from {model.absolute()}") == 1


def birefnet_swin_t(path: Path) -> Path:
    """BiRefNet Swin-T (BiRefNet_lite's backbone) in the original's names, random weights."""
    with gzip.open(HERE / "birefnet_backbone_keys.json.gz", "rt") as f:
        backbone = json.load(f)["swin_v1_t"]
    keys = {**json.loads((HERE / "birefnet_keys.json").read_text())["swin_v1_t"], **backbone}
    gen = torch.Generator().manual_seed(0)
    state = {k: (torch.zeros(v, dtype=torch.long) if k.endswith("num_batches_tracked") else
                 (torch.rand(v, generator=gen) * 0.2 - 0.1).half()) for k, v in keys.items()}
    for key in state:
        if key.endswith("running_var"):
            state[key] = state[key].abs() + 0.5
    save_file(state, str(path))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("release", ["birefnet", "minet-r50"])
def test_train_fine_tunes_an_imported_release_with_no_architecture_keys(release, tmp_path):
    """``import-weights`` then ``sodkit train MODEL data_root=DIR`` (and only run-size keys):
    the release's network starts from every one of its tensors and trains."""
    if release == "birefnet":
        source = birefnet_swin_t(tmp_path / "model.safetensors")
    else:
        source = save_legacy(synthetic("minet-r50"), tmp_path / "MINet_Res50.pth")
    model = tmp_path / f"{release}.safetensors"
    assert main(["import-weights", release, str(source), "--out", str(model)]) == 0
    source.unlink()
    mine = write_folder(tmp_path / "mine", 8, seed=5)
    assert main(["train", str(model), f"data_root={mine}", f"output_root={tmp_path}",
                 *SMALL]) == 0
    run = tmp_path / f"finetune_{release}"
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True, mmap=True)
    stored = read_model_file(model)["config"]
    assert state["config"]["model"]["backbone"] == stored["model"]["backbone"]
    assert state["config"]["loss"]["terms"] == stored["loss"]["terms"]
    assert state["init"]["fresh"] == 0 and state["init"]["file"] == str(model.absolute())
    assert state["step"] == 2 and "val" in json.loads((run / "results.json").read_text())
