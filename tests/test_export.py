"""``sodkit export``: every network exports to ONNX and matches PyTorch in onnxruntime."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import Config, ModelCfg, to_dict
from sodkit.network import NETWORKS, build_network


def _checkpoint(tmp_path: Path, name: str, ema: bool = False) -> Path:
    """A sodkit-format checkpoint of a freshly built tiny network (BatchNorm stats moved off
    their defaults by one training-mode forward, so eval mode really uses them)."""
    torch.manual_seed(0)
    cfg = Config(model=ModelCfg(name=name, backbone="resnet18", decoder_channels=8))
    net = build_network(cfg.model)
    with torch.no_grad():
        net.train()(torch.randn(2, 3, 64, 64))
    state = {"model": net.state_dict(), "config": to_dict(cfg), "epoch": 1}
    if ema:
        state["ema"] = {"decay": 0.9, "updates": 1,
                        "model": {k: v + 0.01 if v.is_floating_point() else v
                                  for k, v in net.state_dict().items()}}
    path = tmp_path / f"{name}.pt"
    torch.save(state, path)
    return path


# birefnet's deformable convolutions have no ONNX export (issue 24, item 6): refused, below
EXPORTABLE = [name for name in NETWORKS.names() if name != "birefnet"]


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPORTABLE)
def test_every_network_exports_with_parity_at_three_sizes(tmp_path, name: str, capsys) -> None:
    checkpoint = _checkpoint(tmp_path, name)
    onnx = tmp_path / f"{name}.onnx"
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(onnx),
                 "--size", "64", "64", "--dynamic"]) == 0
    out = capsys.readouterr().out
    diffs = [float(line.rsplit("= ", 1)[1]) for line in out.splitlines() if "largest" in line]
    assert len(diffs) == 3 and max(diffs) <= 1e-4, out  # 64x64 and two other sizes
    assert onnx.is_file() and "wrote" in out


def test_fixed_size_export_checks_one_size_and_uses_ema(tmp_path, capsys) -> None:
    checkpoint = _checkpoint(tmp_path, "fpn", ema=True)
    onnx = tmp_path / "fixed.onnx"
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(onnx),
                 "--size", "64", "96"]) == 0
    out = capsys.readouterr().out
    assert "64x96: largest" in out and out.count("largest") == 1 and "ema weights" in out


def test_export_refuses_to_replace_files(tmp_path, capsys) -> None:
    checkpoint = _checkpoint(tmp_path, "fpn")
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(checkpoint)]) == 2
    assert ".onnx" in capsys.readouterr().err
    existing = tmp_path / "old.onnx"
    existing.write_bytes(b"keep")
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(existing)]) == 2
    assert "--overwrite" in capsys.readouterr().err and existing.read_bytes() == b"keep"


def test_an_operator_onnx_cannot_write_is_refused_in_one_line(tmp_path, capsys) -> None:
    checkpoint = _checkpoint(tmp_path, "birefnet")
    onnx = tmp_path / "birefnet.onnx"
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(onnx),
                 "--size", "64", "64"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "torchvision::deform_conv2d" in err[0], err
    assert "model.birefnet.dec_att" in err[0] and not onnx.exists()
