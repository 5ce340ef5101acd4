"""``sodkit export``: every network exports to ONNX and matches PyTorch in onnxruntime."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torchvision.ops import deform_conv2d

from sodkit.cli import main
from sodkit.config import Config, ModelCfg, to_dict
from sodkit.engine.export import SaliencyModel, export_onnx
from sodkit.errors import UserError
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


@pytest.mark.slow
@pytest.mark.parametrize("name", NETWORKS.names())
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


class _Unexportable(nn.Module):
    """A network with an operator ONNX export has no symbolic for (torchvision's deformable
    convolution called directly, not through sodkit's module)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = nn.Conv2d(3, 18, 3, padding=1)
        self.weight = nn.Parameter(torch.randn(1, 3, 3, 3))

    def forward(self, image):
        return {"logits": deform_conv2d(image, self.offset(image), self.weight, padding=1)}


def test_an_operator_onnx_cannot_write_is_refused_in_one_line_and_nothing_else(
        tmp_path, capfd) -> None:
    onnx = tmp_path / "refused.onnx"
    with pytest.raises(UserError) as refused:
        export_onnx(SaliencyModel(_Unexportable()), onnx, (16, 16), 17, dynamic=False)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and "torchvision::deform_conv2d" in message, message
    out, err = capfd.readouterr()  # torch.onnx printed the whole TorchScript graph here
    assert out == "" and err == "", (out[:500], err[:500])
    assert not onnx.exists()


def test_birefnet_at_an_opset_without_grid_sample_is_one_line(tmp_path, capfd) -> None:
    checkpoint = _checkpoint(tmp_path, "birefnet")
    onnx = tmp_path / "birefnet.onnx"
    assert main(["export", "--checkpoint", str(checkpoint), "--onnx", str(onnx),
                 "--size", "64", "64", "--opset", "15"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert "deformable convolutions need --opset 16 or newer" in err and not onnx.exists()


def test_an_export_leaves_torchs_onnx_log_off(tmp_path) -> None:
    """torch switches its ONNX log on in every export and never off (it tests a function
    object for truth): later code in the process would print graphs."""
    model = SaliencyModel(build_network(ModelCfg(name="fpn", backbone="test_resnet",
                                                 decoder_channels=8), aux_outputs=False))
    export_onnx(model, tmp_path / "m.onnx", (32, 32), 17, dynamic=False)
    assert not torch._C._jit_is_onnx_log_enabled()
