"""BiRefNet as the general recipe builds it (``model.birefnet`` defaults: ``ASPPDeformable`` in
every decoder block and the squeeze block, the backbone run at two scales, image patches at
every level) exports to one dynamic ONNX graph with parity at three sizes, in both forms of the
deformable convolution; with Swin the shifted windows' masks are built in the graph for each
size (windows padded first, as BiRefNet's own Swin)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sodkit.config import ModelCfg
from sodkit.engine.export import (
    SaliencyModel,
    check_parity,
    default_opset,
    export_onnx,
    parity_sizes,
)
from sodkit.module.aspp import DeformConv2d
from sodkit.network import build_network


def _birefnet(backbone: str) -> SaliencyModel:
    """Random weights; deformable offsets that move samples off the grid and out of the map
    (a fresh module's are zero: a plain convolution), BatchNorm statistics off their defaults,
    and logits large enough that the probabilities spread over (0, 1), so that the check on
    them sees every difference."""
    torch.manual_seed(0)
    net = build_network(ModelCfg(name="birefnet", backbone=backbone), aux_outputs=False)
    for m in net.modules():
        if isinstance(m, DeformConv2d):
            nn.init.normal_(m.offset.weight, std=0.05)
            nn.init.normal_(m.modulator.weight, std=0.05)
    with torch.no_grad():
        net.train()(torch.randn(2, 3, 64, 64))
        net.head.weight.mul_(200)
    return SaliencyModel(net).eval()


def _export_and_check(backbone: str, size: int, opset: int | None, tmp_path) -> None:
    model = _birefnet(backbone)
    path = tmp_path / "birefnet.onnx"
    export_onnx(model, path, (size, size), opset or default_opset(model), dynamic=True)
    sizes = parity_sizes((size, size), dynamic=True)
    results = check_parity(model, path, sizes)
    assert [s for s, _ in results] == sizes and max(d for _, d in results) <= 1e-4, results
    with torch.no_grad():
        assert model(torch.randn(2, 3, size, size)).std() > 0.05  # not a constant map


@pytest.mark.slow  # about 20 s of CPU: BiRefNet's graph is large whatever the backbone
def test_birefnet_pvt_exports_with_the_decomposition(tmp_path) -> None:
    _export_and_check("pvt_v2_b0", 128, 17, tmp_path)  # PVTv2's 8x8 reduction needs >= 32 px


@pytest.mark.slow  # Swin-T: 28M parameters traced, twice (two scales)
def test_birefnet_swin_exports_at_the_default_opset(tmp_path) -> None:
    """ONNX's DeformConv node where this onnxruntime runs it, else the decomposition."""
    _export_and_check("swin_tiny_patch4_window7_224", 64, None, tmp_path)
