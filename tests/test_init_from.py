"""``model.init_from``: a new run starting from a trained model's weights (fine-tuning).

Every kind of source (checkpoint with or without EMA, model file, weights files in sodkit's
names, wrapper prefixes), every registered network, the strict check and ``init_exclude``, at
the level of :func:`sodkit.engine.init_from.init_model` (fast); the command-level promises
(exit 2 with nothing written, the starting model's numbers, resume) in test_finetune.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sodkit.config import Config, ConfigError, ModelCfg, to_dict
from sodkit.engine.init_from import init_model
from sodkit.errors import UserError
from sodkit.model_file import file_sha256, write_model_file
from sodkit.network import NETWORKS, build_network
from sodkit.report.training import describe_init as describe


def _cfg(name: str = "fpn", **model: object) -> Config:
    cfg = Config()
    cfg.model = ModelCfg(name=name, backbone="resnet18", decoder_channels=8, pretrained=None,
                         **model)
    return cfg


def _net(cfg: Config, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_network(cfg.model)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _start(cfg: Config, path: Path, seed: int = 1, **model: object) -> tuple[torch.nn.Module,
                                                                            dict]:
    for key, value in {"init_from": str(path), **model}.items():
        setattr(cfg.model, key, value)
    net = _net(cfg, seed)
    return net, init_model(net, cfg)


# every network from a checkpoint and from a weights file; every kind of file with fpn
CASES = [(name, kind) for name in NETWORKS.names() for kind in ("checkpoint", "safetensors")]
CASES += [("fpn", "state_dict_pt"), ("fpn", "model_file")]


@pytest.mark.parametrize(("name", "kind"), CASES)
def test_every_network_starts_from_its_own_weights(name, kind, tmp_path):
    cfg = _cfg(name)
    source = _net(cfg, seed=0).state_dict()
    path = tmp_path / ("w.safetensors" if kind in ("safetensors", "model_file") else "w.pt")
    if kind == "checkpoint":
        torch.save({"model": source, "config": to_dict(cfg), "ema": None}, path)
    elif kind == "state_dict_pt":
        torch.save(source, path)
    elif kind == "safetensors":
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in source.items()}, path)
    else:
        write_model_file(path, source, to_dict(cfg), {"source": "test", "weights": "model"})
    fresh = _net(cfg, seed=1).state_dict()
    assert not _same(fresh, source)  # the check below could fail
    net, record = _start(cfg, path)
    assert _same(net.state_dict(), source)
    expected = {"checkpoint": "checkpoint", "model_file": "model file"}.get(kind, "weights file")
    assert record["kind"] == expected
    assert record["loaded"] == len(source) and record["fresh"] == 0
    assert record["sha256"] == file_sha256(path) and record["file"] == str(path)


@pytest.mark.parametrize("bare", [False, True])
def test_a_checkpoint_gives_its_ema_weights_unless_init_weights_model(bare, tmp_path):
    cfg = _cfg()
    trained, averaged = _net(cfg, 0).state_dict(), _net(cfg, 2).state_dict()
    path = tmp_path / "c.pt"
    ema = averaged if bare else {"decay": 0.9, "updates": 3, "model": averaged}
    torch.save({"model": trained, "ema": ema, "config": to_dict(cfg)}, path)
    net, record = _start(cfg, path)
    assert _same(net.state_dict(), averaged) and record["weights"] == "ema"
    assert "its EMA weights" in describe(record)
    net, record = _start(_cfg(), path, init_weights="model")
    assert _same(net.state_dict(), trained) and record["weights"] == "model"


def test_ddp_and_compile_prefixes_are_stripped(tmp_path):
    cfg = _cfg()
    source = _net(cfg, 0).state_dict()
    path = tmp_path / "w.pt"
    torch.save({f"module._orig_mod.{k}": v for k, v in source.items()}, path)
    net, _ = _start(cfg, path)
    assert _same(net.state_dict(), source)


def test_a_mismatch_names_counts_first_names_and_how_to_exclude(tmp_path):
    minet = _cfg("minet")
    path = tmp_path / "minet.pt"
    source = _net(minet, 0).state_dict()
    torch.save({"model": source, "config": to_dict(minet)}, path)
    with pytest.raises(UserError) as info:
        _start(_cfg("fpn"), path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"model.init_from: {path} does not fit this network: ")
    missing = sum(k not in source for k in _net(_cfg("fpn"), 0).state_dict())
    assert f"{missing} missing from the file (" in message
    assert " unexpected, not in this network (" in message
    assert "model.name 'minet' -> 'fpn'" in message
    assert "model.init_exclude=[" in message


def test_init_exclude_leaves_parts_fresh_and_a_typo_is_refused(tmp_path):
    cfg = _cfg()
    source = {k: v for k, v in _net(cfg, 0).state_dict().items() if not k.startswith("heads.")}
    path = tmp_path / "w.pt"
    torch.save(source, path)
    with pytest.raises(UserError, match=r"\d+ missing from the file \(heads\."):
        _start(_cfg(), path)
    net, record = _start(_cfg(), path, init_exclude=["heads"])
    fresh = _net(_cfg(), 1).state_dict()  # the same seed as _start's: its fresh init
    state = net.state_dict()
    assert all(torch.equal(state[k], source[k]) for k in source)
    heads = [k for k in state if k.startswith("heads.")]
    assert heads and all(torch.equal(state[k], fresh[k]) for k in heads)
    assert record["fresh"] == len(heads) and record["exclude"] == ["heads"]
    assert f"{len(heads)} tensors left at their fresh initialisation (under heads)" in \
        describe(record)
    with pytest.raises(ConfigError, match=r"model.init_exclude: 'haeds' matches no tensor.*"
                                          r"did you mean 'heads'"):
        _start(_cfg(), path, init_exclude=["haeds"])


def test_init_exclude_also_leaves_out_a_files_extra_tensors(tmp_path):
    cfg = _cfg()
    source = _net(cfg, 0).state_dict()
    path = tmp_path / "w.pt"
    torch.save({**source, "extra_head.weight": torch.ones(2)}, path)
    with pytest.raises(UserError, match=r"1 unexpected, not in this network \(extra_head.weight\)"
                                        r".*model.init_exclude=\[extra_head\]"):
        _start(_cfg(), path)
    net, record = _start(_cfg(), path, init_exclude=["extra_head"])
    assert _same(net.state_dict(), source) and record["fresh"] == 0


@pytest.mark.parametrize("content", ["missing", "folder", "no_weights", "code", "not_tensors"])
def test_a_bad_source_is_one_line(content, tmp_path):
    path = tmp_path / "x.pt"
    if content == "folder":
        path.mkdir()
    elif content == "no_weights":
        torch.save({"epoch": 3}, path)
    elif content == "not_tensors":
        torch.save({"model": {"heads.0.weight": 3}, "config": {}}, path)
    elif content == "code":
        torch.save({"model": {}, "obj": Path("a")}, path)  # needs a pickled class
    with pytest.raises(UserError) as info:
        _start(_cfg(), path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert {"missing": "file not found", "folder": "is a folder", "no_weights": "holds no weights",
            "code": "never unpickles code",
            "not_tensors": "its weight 'heads.0.weight' is a int, not a tensor"}[content] in message


@pytest.mark.parametrize("name, content, kind", [
    ("mask.png", b"\x89PNG\r\n\x1a\n" + bytes(40), "a PNG image"),
    ("photo.jpg", b"\xff\xd8\xff\xe0" + bytes(40), "a JPEG image"),
    ("recipe.yaml", b"model:\n  name: fpn\n", "text"),
    ("broken.pt", b"\x80\x02garbage", "its pickle is damaged"),
], ids=["png", "jpeg", "text", "broken_pickle"])
def test_a_file_that_is_no_weights_says_what_it_is_and_what_init_from_takes(
        tmp_path, name, content, kind):
    """A PNG given as model.init_from was refused as a pickle "needing code", with the advice
    to load it with weights_only=False (#32 item 7)."""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(UserError) as info:
        _start(_cfg(), path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and kind in message, message
    assert "model.init_from takes a sodkit checkpoint (.pt), a model file" in message
    assert "weights_only" not in message and "pickled code" not in message


def test_describe_shows_a_record_of_any_origin_as_text():
    # the report reads the record from a checkpoint it did not write: odd types are shown
    text = describe({"file": None, "loaded": "x", "fresh": 2, "exclude": 5, "weights": [1]})
    assert "2 tensors left at their fresh initialisation (under 5)" in text
    assert "under a, b" in describe({"fresh": 1, "exclude": ["a", "b"]})
