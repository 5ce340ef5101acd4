"""ONNX export with parity for transformer backbones: PVTv2, Swin and a plain ViT (whose
position embedding is resampled once for the export size); a dynamic ViT graph is refused with
the reason."""

from __future__ import annotations

import pytest
import torch

from sodkit.config import ModelCfg
from sodkit.engine.export import (
    TOLERANCE,
    SaliencyModel,
    check_parity,
    export_onnx,
    parity_sizes,
)
from sodkit.errors import UserError
from sodkit.network import build_network


def _saliency(backbone: str) -> SaliencyModel:
    torch.manual_seed(0)
    return SaliencyModel(build_network(ModelCfg(name="fpn", backbone=backbone,
                                                decoder_channels=8), aux_outputs=False)).eval()


def _export_and_check(backbone: str, size: tuple[int, int], tmp_path,
                      dynamic: bool = False) -> None:
    model = _saliency(backbone)
    with torch.no_grad():
        head = model.network.heads[0]  # logits 50x larger around 0: probabilities spread
        head.weight.mul_(50)
        head.bias.mul_(50).sub_(model.network(torch.randn(2, 3, *size))["logits"].mean())
        assert model(torch.randn(2, 3, *size)).std() > 0.05
        before = model(torch.ones(1, 3, *size))
    path = tmp_path / "model.onnx"
    export_onnx(model, path, size, 17, dynamic=dynamic)
    results = check_parity(model, path, parity_sizes(size, dynamic))
    assert len(results) == (3 if dynamic else 1)
    assert max(diff for _, diff in results) <= TOLERANCE, results
    with torch.no_grad():  # the PyTorch model itself is unchanged by the export
        assert torch.equal(model(torch.ones(1, 3, *size)), before)


@pytest.mark.parametrize(("backbone", "size"), [
    ("test_vit", (72, 56)),  # a plain ViT, patch 16: padded to 80 x 64
    ("pvt_v2_b0", (64, 64)),
])
def test_export_keeps_parity(backbone: str, size: tuple[int, int], tmp_path) -> None:
    _export_and_check(backbone, size, tmp_path)


@pytest.mark.slow  # Swin-T: 28M parameters traced
def test_swin_dynamic_export_keeps_parity_at_three_sizes(tmp_path) -> None:
    """timm's shifted-window masks and window padding follow each size in the graph."""
    _export_and_check("swin_tiny_patch4_window7_224", (64, 64), tmp_path, dynamic=True)


def test_dynamic_export_of_a_plain_vit_is_refused_with_the_reason(tmp_path) -> None:
    with pytest.raises(UserError, match="bicubic antialiased interpolation, which ONNX has no "
                                        "operator for; export at a fixed size"):
        export_onnx(_saliency("test_vit"), tmp_path / "model.onnx", (64, 64), 17, dynamic=True)
    assert not (tmp_path / "model.onnx").exists()
