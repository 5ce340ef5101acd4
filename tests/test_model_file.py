"""Model files (#23 part 2) and a slim best.pt (#28): `export --model` writes weights, config and
provenance in one .safetensors file that every command taking a checkpoint takes; best.pt holds
no resumable training state."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config import Config, ModelCfg, to_dict
from sodkit.model_file import read_model_file, read_safetensors
from sodkit.network import build_network
from tests.conftest import ROOT
from tests.sod_fixtures import TINY_BACKBONE, tiny_overrides

TRAINING_STATE = ("optimizer", "scheduler", "scaler", "rng", "ranks")


def _pngs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def _export(checkpoint: Path, out: Path, *extra: str) -> Path:
    assert main(["export", "--checkpoint", str(checkpoint), "--model", str(out), *extra]) == 0
    return out


def test_model_file_predicts_the_same_pngs_as_its_checkpoint(trained, data_root, tmp_path):
    last = trained / "checkpoints" / "last.pt"
    model = _export(last, tmp_path / "model.safetensors")
    images = data_root / "DUTS-TE" / "DUTS-TE-Image"
    for source, out in ((last, "from_pt"), (model, "from_model")):
        assert main(["predict", "--checkpoint", str(source), "--out", str(tmp_path / out),
                     "--workers", "0", str(images)]) == 0
    masks = _pngs(tmp_path / "from_pt")
    assert len(masks) == 6 and _pngs(tmp_path / "from_model") == masks  # byte for byte

    loaded = read_model_file(model)
    state = torch.load(last, weights_only=True)
    assert loaded["config"] == state["config"]
    assert loaded["model"].keys() == state["model"].keys()
    assert all(torch.equal(loaded["model"][k], state["model"][k]) for k in state["model"])
    provenance = loaded["provenance"]
    assert provenance["source"] == "last.pt" and provenance["weights"] == "model"
    assert provenance["format"] == "sodkit-checkpoint"
    assert provenance["sha256"] == hashlib.sha256(last.read_bytes()).hexdigest()
    assert provenance["epoch"] == state["epoch"] and provenance["sodkit_version"]
    assert not any(k.startswith(TRAINING_STATE) for k in loaded["model"])


def test_model_file_is_read_without_unpickling(trained, tmp_path):
    """safetensors: a JSON header and raw bytes; its metadata names the format."""
    model = _export(trained / "checkpoints" / "last.pt", tmp_path / "m.safetensors")
    _, metadata = read_safetensors(model)
    assert metadata["format"] == "sodkit-model/1"
    assert json.loads(metadata["sodkit.config"])["model"]["backbone"] == TINY_BACKBONE
    head = model.read_bytes()[:9]  # 8 bytes of header length, then JSON: no zip, no pickle
    assert head[8:9] == b"{" and not head.startswith((b"PK", b"\x80"))


def _ema_checkpoint(tmp_path: Path) -> tuple[Path, dict]:
    torch.manual_seed(0)
    cfg = Config(model=ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8))
    net = build_network(cfg.model)
    ema = {k: v + 0.01 if v.is_floating_point() else v for k, v in net.state_dict().items()}
    state = {"model": net.state_dict(), "config": to_dict(cfg), "epoch": 3,
             "ema": {"decay": 0.9, "updates": 1, "model": ema}}
    path = tmp_path / "ema.pt"
    torch.save(state, path)
    return path, state


def test_export_model_takes_the_ema_weights_unless_told(tmp_path, capsys):
    checkpoint, state = _ema_checkpoint(tmp_path)
    ema = read_model_file(_export(checkpoint, tmp_path / "ema.safetensors"))
    assert ema["provenance"]["weights"] == "ema"
    assert all(torch.equal(ema["model"][k], state["ema"]["model"][k]) for k in ema["model"])
    plain = read_model_file(_export(checkpoint, tmp_path / "m.safetensors", "--weights", "model"))
    assert plain["provenance"]["weights"] == "model"
    assert all(torch.equal(plain["model"][k], state["model"][k]) for k in plain["model"])
    capsys.readouterr()
    # a model file holds one set of weights: asking it for the other is a one-line error
    code = main(["export", "--checkpoint", str(tmp_path / "ema.safetensors"), "--model",
                 str(tmp_path / "again.safetensors"), "--weights", "model"])
    assert code == 2
    assert "holding the ema weights only" in capsys.readouterr().err
    assert not (tmp_path / "again.safetensors").exists()


def test_export_model_refuses_a_bad_name_and_replaces_only_its_own(tmp_path, capsys):
    checkpoint, _ = _ema_checkpoint(tmp_path)
    assert main(["export", "--checkpoint", str(checkpoint), "--model",
                 str(tmp_path / "m.pt")]) == 2
    assert "must end with .safetensors" in capsys.readouterr().err
    user = tmp_path / "user.safetensors"
    user.write_bytes(b"mine")
    assert main(["export", "--checkpoint", str(checkpoint), "--model", str(user)]) == 2
    assert user.read_bytes() == b"mine"
    out = _export(checkpoint, tmp_path / "ok.safetensors")
    _export(checkpoint, out)  # its own file, unchanged since: replaced
    capsys.readouterr()
    assert main(["export", "--checkpoint", str(checkpoint), "--model", str(out), "--dynamic"]) == 2
    assert "apply to --onnx" in capsys.readouterr().err


def test_info_test_and_onnx_export_take_a_model_file(trained, data_root, tmp_path, capsys):
    model = _export(trained / "checkpoints" / "last.pt", tmp_path / "model.safetensors")
    capsys.readouterr()
    assert main(["info", str(model), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["source"]["kind"] == "model file" and info["network"] == "fpn"
    assert info["size"] == 64 and info["source"]["weights"] == "model"
    assert main(["info", str(trained / "checkpoints" / "last.pt"), "data.size=96"]) == 0
    text = capsys.readouterr().out
    assert "source       checkpoint" in text and "at 96x96" in text

    cfg = str(ROOT / "configs" / "demo.yaml")
    overrides = tiny_overrides(data_root, tmp_path, "t")
    assert main(["test", cfg, *overrides, "--checkpoint", str(model),
                 "--out", str(tmp_path / "tested")]) == 0
    tested = json.loads((tmp_path / "tested" / "results.json").read_text())
    trained_results = json.loads((trained / "results.json").read_text())
    assert tested["DUTS-TE"]["MAE"] == pytest.approx(trained_results["DUTS-TE"]["MAE"], abs=1e-9)

    onnx = tmp_path / "m.onnx"
    assert main(["export", "--checkpoint", str(model), "--onnx", str(onnx)]) == 0
    assert onnx.is_file() and "largest |onnxruntime - PyTorch|" in capsys.readouterr().out


def test_best_pt_holds_no_training_state_and_test_and_predict_read_it(trained, data_root,
                                                                      tmp_path, capsys):
    best = trained / "checkpoints" / "best.pt"
    state = torch.load(best, weights_only=True)
    assert not set(TRAINING_STATE) & set(state), sorted(state)
    assert {"model", "config", "epoch", "step", "best"} <= set(state)
    assert "optimizer" in torch.load(trained / "checkpoints" / "last.pt", weights_only=True)

    cfg = str(ROOT / "configs" / "demo.yaml")
    overrides = tiny_overrides(data_root, tmp_path, "t")
    assert main(["test", cfg, *overrides, "--checkpoint", str(best),
                 "--out", str(tmp_path / "tested")]) == 0
    assert (tmp_path / "tested" / "results.json").is_file()
    assert main(["predict", "--checkpoint", str(best), "--out", str(tmp_path / "masks"),
                 "--workers", "0", str(data_root / "DUTS-TE" / "DUTS-TE-Image")]) == 0
    assert len(_pngs(tmp_path / "masks")) == 6
    capsys.readouterr()
    assert main(["train", cfg, *tiny_overrides(data_root, tmp_path, "again"),
                 "--resume", str(best)]) == 2
    assert "best.pt keeps no optimizer state" in capsys.readouterr().err


def test_a_damaged_or_foreign_safetensors_file_is_one_line(tmp_path, capsys):
    """Read before any work, never unpickled: a header that declares more than the file holds, a
    truncated file, and a weights file without sodkit's metadata are each one line, exit 2."""
    from safetensors.torch import save_file

    checkpoint, _ = _ema_checkpoint(tmp_path)
    good = _export(checkpoint, tmp_path / "good.safetensors").read_bytes()
    hostile = tmp_path / "hostile.safetensors"
    hostile.write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(good[: len(good) // 2])
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, foreign)
    image = tmp_path / "in.png"  # a real image: the inputs' headers are checked first
    cv2.imwrite(str(image), np.zeros((8, 8, 3), np.uint8))
    capsys.readouterr()
    for path, message in ((hostile, "its header declares"), (truncated, "cannot read"),
                          (foreign, "not a sodkit model file")):
        out = tmp_path / f"out_{path.stem}"
        assert main(["predict", "--checkpoint", str(path), "--out", str(out), "--workers", "0",
                     str(image)]) == 2
        err = capsys.readouterr().err
        assert message in err and err.strip().count("\n") == 0, err
        assert not out.exists()
