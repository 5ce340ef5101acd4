"""A model file is input, not trust (#32 item 1): the config a `.safetensors` model file or a
`.pt` checkpoint carries gets a recipe's checks, names no file or host that sodkit would open,
and metadata of the wrong JSON type is one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import sodkit
from sodkit.config import Config, DataCfg, ModelCfg, to_dict
from sodkit.config.loader import ConfigError, stored_config
from sodkit.config.stored import untrusted_config
from sodkit.errors import UserError
from sodkit.model_file import model_file_bytes, read_model_file
from sodkit.network import build_network
from tests.conftest import ROOT
from tests.sod_fixtures import write_photos

DEMO = ROOT / "configs" / "demo.yaml"
SECRET = "secret_private_tensor_name"


def tiny_state() -> dict:
    torch.manual_seed(0)
    cfg = Config(data=DataCfg(size=32), model=ModelCfg(backbone="test_resnet",
                                                       decoder_channels=8))
    net = build_network(cfg.model)
    return {"model": net.state_dict(), "config": to_dict(cfg), "epoch": 1, "step": 2}


def model_file(path: Path, config: dict | str, provenance: dict | str | None = None) -> Path:
    """A model file of a tiny network whose stored config (and provenance) are given as is."""
    state = tiny_state()
    path.write_bytes(model_file_bytes(state["model"], {}, {"weights": "model"}))
    tensors = load_file(path)
    metadata = {"format": "sodkit-model/1",
                "sodkit.config": config if isinstance(config, str) else json.dumps(config),
                "sodkit.provenance": json.dumps({"weights": "model"}) if provenance is None
                else provenance if isinstance(provenance, str) else json.dumps(provenance)}
    save_file(tensors, str(path), metadata=metadata)
    return path


def private_checkpoint(path: Path) -> Path:
    """A file of someone else's, whose tensor names no command may read out."""
    torch.save({SECRET: torch.zeros(3), "state_dict": {SECRET + "_2": torch.ones(2)}}, path)
    return path


@pytest.fixture
def images(tmp_path) -> Path:
    return write_photos(tmp_path / "images")


def hostile_config(private: Path) -> dict:
    config = tiny_state()["config"]
    config["model"]["backbone_kwargs"] = {
        "checkpoint_path": str(private), "drop_path_rate": 0.0,
        "pretrained_cfg_overlay": {"file": str(private)}}
    config["model"]["pretrained"] = str(private)
    config["model"]["init_from"] = str(private)
    config["data"]["train"] = [{"root": "/etc", "image_dir": "x", "mask_dir": "y"}]
    config["output_root"] = "/etc"
    return config


def test_a_model_file_naming_another_file_opens_nothing(tmp_path, images, run_cli):
    (tmp_path / "elsewhere").mkdir()
    private = private_checkpoint(tmp_path / "elsewhere" / "private.pt")
    model = model_file(tmp_path / "m.safetensors", hostile_config(private))
    out = tmp_path / "masks"
    done = run_cli("predict", "--checkpoint", str(model), "--out", str(out), "--workers", "0",
                   str(images))
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert sorted(p.name for p in out.glob("*.png")) == ["im0.png", "im1.png"]
    warned = [line for line in done.stderr.splitlines() if "names files or hosts" in line]
    assert len(warned) == 1 and "model.backbone_kwargs.checkpoint_path" in warned[0], done.stderr
    assert "pretrained_cfg_overlay" in warned[0] and "drop_path_rate" not in warned[0]

    exported = tmp_path / "again.safetensors"
    done = run_cli("export", "--checkpoint", str(model), "--model", str(exported))
    assert done.returncode == 0 and SECRET not in done.stdout + done.stderr, done.stderr
    passed_on = read_model_file(exported)["config"]  # the hostile entries are not passed on
    assert passed_on["model"]["backbone_kwargs"] == {"drop_path_rate": 0.0}
    assert passed_on["data"]["train"] == hostile_config(private)["data"]["train"]  # the record
    done = run_cli("info", str(model))
    assert done.returncode == 0 and SECRET not in done.stdout + done.stderr, done.stderr
    loaded = sodkit.load(model, device="cpu")
    assert loaded.config.model.backbone_kwargs == {"drop_path_rate": 0.0}
    assert loaded.config.model.pretrained is None and loaded.config.model.init_from is None
    assert loaded.config.data.train == [] and loaded.config.output_root == "output"


def test_a_model_file_as_a_fine_tuning_recipe_takes_no_file_it_names(tmp_path, run_cli):
    """`sodkit train MODEL.safetensors` runs the file's own recipe (sodkit/finetune.py): it
    reads the stored config through the same function, so the file names nothing it opens."""
    (tmp_path / "elsewhere").mkdir()
    private = private_checkpoint(tmp_path / "elsewhere" / "private.pt")
    model = model_file(tmp_path / "m.safetensors", hostile_config(private))
    done = run_cli("info", str(model), "--json")  # the config `sodkit train FILE` would run
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    config = json.loads(done.stdout)["config"]
    assert config["model"]["backbone_kwargs"] == {"drop_path_rate": 0.0}
    assert config["model"]["init_from"] == str(model.absolute())
    assert config["model"]["pretrained"] is None and config["output_root"] != "/etc"


def test_a_missing_file_named_by_the_stored_config_is_not_asked_for(tmp_path, images, run_cli):
    """The file need not exist: before, timm looked for it and the command failed."""
    config = tiny_state()["config"]
    config["model"]["backbone_kwargs"] = {"checkpoint_path": str(tmp_path / "nowhere.pth")}
    model = model_file(tmp_path / "m.safetensors", config)
    done = run_cli("predict", "--checkpoint", str(model), "--out", str(tmp_path / "o"),
                   "--workers", "0", str(images))
    assert done.returncode == 0, done.stderr
    assert "nowhere.pth" not in done.stderr.replace("checkpoint_path", "")


def test_a_checkpoint_s_stored_config_follows_the_same_rules(tmp_path, images, run_cli):
    private = private_checkpoint(tmp_path / "private.pt")
    state = tiny_state()
    state["config"] = hostile_config(private)
    checkpoint = tmp_path / "last.pt"
    torch.save(state, checkpoint)
    done = run_cli("predict", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "o"),
                   "--workers", "0", str(images))
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("entry", [
    {"checkpoint_path": "w.pth"},  # a bare file name is a path too (the current folder)
    {"pretrained": True},  # a hub download
    {"hf_hub_id": "someone/model"},
    {"nested": {"deeper": ["~/x.safetensors"]}},
    {"cache_dir": "cache"},
    {"url": "https://example.org/w.pth"},
])
def test_every_path_or_host_in_free_form_kwargs_is_taken_out(entry):
    config = tiny_state()["config"]
    config["model"]["backbone_kwargs"] = {**entry, "drop_path_rate": 0.1, "global_pool": "avg"}
    config["loss"]["terms"] = {"bce": {"weight": 1, "file": "/tmp/x"}, "iou": 1.0}
    clean, dropped = untrusted_config(config, "m.safetensors")
    assert clean["model"]["backbone_kwargs"] == {"drop_path_rate": 0.1, "global_pool": "avg"}
    assert clean["loss"]["terms"] == {"bce": {"weight": 1}, "iou": 1.0}
    assert "loss.terms.bce.file" in dropped
    assert config["model"]["backbone_kwargs"] != clean["model"]["backbone_kwargs"]  # a copy


@pytest.mark.parametrize("config, words", [
    ([1, 2], "list"),
    ("text", "str"),
    (None, "got none (no config)"),
    ({"model": [1]}, "model: expected a mapping"),
    ({"data": {"preprocess": "../../evil"}}, "data.preprocess: '../../evil' is not one of"),
])
def test_a_stored_config_of_the_wrong_shape_is_one_line_naming_the_file(config, words):
    with pytest.raises(ConfigError) as caught:
        stored_config(config, "/x/m.safetensors")
    assert str(caught.value).startswith("/x/m.safetensors: ") and words in str(caught.value)


@pytest.mark.parametrize("config, provenance, words", [
    ("[1, 2]", None, "sodkit.config metadata is a JSON array"),
    ('"just text"', None, "sodkit.config metadata is a JSON string"),
    (None, "[]", "sodkit.provenance metadata is a JSON array"),
    (None, '"model"', "sodkit.provenance metadata is a JSON string"),
    (None, "not json", "sodkit.provenance metadata is not JSON"),
])
def test_metadata_of_the_wrong_json_type_is_one_line(tmp_path, images, run_cli, config,
                                                     provenance, words):
    model = model_file(tmp_path / "m.safetensors",
                       config if config is not None else tiny_state()["config"], provenance)
    for args in (["predict", "--checkpoint", str(model), "--out", str(tmp_path / "o"),
                  str(images)],
                 ["info", str(model)],
                 ["export", "--checkpoint", str(model), "--model", str(tmp_path / "e.safetensors")],
                 ["test", str(DEMO), "--checkpoint", str(model)]):
        done = run_cli(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr)
        assert str(model) in lines[0] and words in lines[0], lines
    with pytest.raises(UserError, match=words):
        sodkit.load(model)
    assert not (tmp_path / "o").exists() and not (tmp_path / "e.safetensors").exists()


def test_a_stored_preprocess_up_the_tree_is_refused_naming_the_file(tmp_path, images, run_cli,
                                                                  data_root):
    config = tiny_state()["config"]
    config["data"]["preprocess"] = "../../evil"
    model = model_file(tmp_path / "m.safetensors", config)
    state = tiny_state()
    state["config"] = config
    checkpoint = tmp_path / "c.pt"
    torch.save(state, checkpoint)
    for source in (model, checkpoint):
        for args in (["predict", "--checkpoint", str(source), "--out", str(tmp_path / "o"),
                      str(images)],
                     ["test", str(DEMO), f"data_root={data_root}",
                      "data.test=[{preset: duts-te}]", "--checkpoint", str(source),
                      "--out", str(tmp_path / "t")]):
            done = run_cli(*args)
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 2 and len(lines) == 1, done.stderr
            assert str(source) in lines[0] and "'../../evil'" in lines[0], lines
    assert not (tmp_path / "o").exists() and not (tmp_path / "t").exists()


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.update(model=[1, 2]), "'model' entry is not a mapping of names to tensors"),
    (lambda s: s.update(ema=[1]), "'ema' entry holds no weights"),
    (lambda s: s.update(config="text"), "stored config is a str"),
])
def test_a_checkpoint_of_the_wrong_shape_is_one_line(tmp_path, images, run_cli, edit, words):
    state = tiny_state()
    edit(state)
    checkpoint = tmp_path / "c.pt"
    torch.save(state, checkpoint)
    for args in (["predict", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "o"),
                  str(images)], ["info", str(checkpoint)]):
        done = run_cli(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert str(checkpoint) in lines[0] and words in lines[0], lines
