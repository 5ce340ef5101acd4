"""Config loading, dotted overrides, validation errors and the resolved dump."""

from __future__ import annotations

from pathlib import Path

import pytest

from sodkit.config import Config, ConfigError, load_config, save_config

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return path


def test_recipes_in_configs_load():
    for path in sorted((ROOT / "configs").glob("*.yaml")):
        cfg = load_config(path)
        assert isinstance(cfg, Config)
        # a test set, or training pairs held out as the test set `val` (data.val_fraction)
        assert cfg.data.test or cfg.data.val_fraction, f"{path.name} has no test sets"


def test_yaml_then_overrides_apply_in_order(tmp_path):
    path = write(tmp_path, "name: a\ntrain: {epochs: 5}\ndata: {size: 224}\n")
    cfg = load_config(path, ["train.epochs=2", "data.size_list=[256, 320]", "optim.lr=1e-3",
                             "model.backbone=resnet34", "train.grad_clip=null"])
    assert cfg.name == "a"
    assert cfg.train.epochs == 2
    assert cfg.data.size == 224
    assert cfg.data.size_list == [256, 320]
    assert cfg.optim.lr == pytest.approx(1e-3)
    assert cfg.model.backbone == "resnet34"
    assert cfg.train.grad_clip is None


def test_override_inside_a_dataset_list(tmp_path):
    path = write(tmp_path, "data:\n  test:\n    - {preset: ecssd, root: /a}\n")
    cfg = load_config(path, ["data.test.0.root=/b"])
    assert cfg.data.test[0].root == "/b"
    assert cfg.data.test[0].preset == "ecssd"


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("train.epoch=3", ["train.epoch", "did you mean train.epochs"]),
        ("trian.epochs=3", ["trian", "did you mean train"]),
        ("data.size=abc", ["data.size", "expected int"]),
        ("train.epochs=1.5", ["train.epochs", "expected int"]),
        ("data.pin_memory=3", ["data.pin_memory", "expected bool"]),
        ("optim.name=sgdd", ["optim.name", "did you mean 'sgd'"]),
        ("data.batch_size=0", ["data.batch_size", "> 0"]),
        ("data.hflip=2", ["data.hflip", "probability"]),
        ("train.epochs", ["key=value"]),
        ("data.test.3.root=/x", ["data.test.3", "not an index"]),
    ],
)
def test_bad_overrides_name_the_key(override, needles):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    for needle in needles:
        assert needle in str(info.value)


def test_unknown_key_in_a_dataset_entry(tmp_path):
    path = write(tmp_path, "data:\n  train:\n    - {preset: duts-tr, rooot: /x}\n")
    expected = r"data\.train\.0\.rooot.*did you mean data\.train\.0\.root"
    with pytest.raises(ConfigError, match=expected):
        load_config(path)


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "train: [1, 2\n"))
    with pytest.raises(ConfigError, match="mapping"):
        load_config(write(tmp_path, "- a\n- b\n"))


def test_resolved_dump_round_trips(tmp_path):
    cfg = load_config(ROOT / "configs" / "demo.yaml", ["train.epochs=3", "data.size_list=[96,128]"])
    save_config(cfg, tmp_path / "config.yaml")
    assert load_config(tmp_path / "config.yaml") == cfg
