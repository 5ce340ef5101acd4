"""The backbone matrix (issue #26): every family x every network builds with no extra keys
(``out_indices: auto``), trains one optimizer step and evaluates, from random weights at 64 px;
``sodkit info`` on the demo recipe works for every family."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config import LossCfg, ModelCfg, OptimCfg
from sodkit.loss import build_criterion
from sodkit.metrics import SODMetrics
from sodkit.network import build_network
from sodkit.optim import build_optimizer

ROOT = Path(__file__).resolve().parents[1]

# family -> input side its windows / patches allow (Swin: windows padded by timm at any size)
# plain ViTs (DINOv2 with patch 14: 64 px is padded to 70; DeiT-S; SAM's ViT-B) get a pyramid.
FAMILIES = {"resnet18": 64, "convnext_atto": 64, "efficientnet_b0": 64,
            "swin_tiny_patch4_window7_224": 64, "pvt_v2_b0": 64,
            "vit_small_patch14_dinov2": 64, "vit_small_patch16_224": 64,
            "samvit_base_patch16": 64}
NETWORKS = ["fpn", "minet", "f3net"]


def _masks(size: int) -> torch.Tensor:
    """Two masks, a square and a disc: each image has foreground and background."""
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    square = ((yy > size // 4) & (yy < 3 * size // 4) & (xx > size // 4) & (xx < size // 2))
    disc = (yy - size / 2) ** 2 + (xx - size / 2) ** 2 < (size / 4) ** 2
    return torch.stack([square, disc]).unsqueeze(1).float()


def train_step_and_evaluate(network: str, backbone: str, size: int, **model_keys) -> dict:
    """One AdamW step on two images, then an eval-mode pass measured with SODMetrics."""
    torch.manual_seed(0)
    model = build_network(ModelCfg(name=network, backbone=backbone, decoder_channels=8,
                                   pretrained=None, **model_keys)).train()
    optimizer = build_optimizer(model, OptimCfg(lr=1e-3, backbone_lr_factor=1.0), 2)
    criterion = build_criterion(LossCfg())
    images, masks = torch.randn(2, 3, size, size), _masks(size)
    outputs = model(images)
    assert tuple(outputs["logits"].shape) == (2, 1, size, size)
    total, _ = criterion(outputs, masks)
    assert torch.isfinite(total)
    total.backward()
    trained = [p for p in model.backbone.parameters() if p.requires_grad]
    assert trained and all(p.grad is not None and torch.isfinite(p.grad).all() for p in trained)
    before = [p.detach().clone() for p in trained]
    optimizer.step()
    assert any(not torch.equal(b, p) for b, p in zip(before, trained, strict=True))
    model.eval()
    with torch.no_grad():
        probs = torch.sigmoid(model(images)["logits"])[:, 0]
    metrics = SODMetrics()
    metrics.update((probs * 255).round().to(torch.uint8).numpy(),
                   (masks[:, 0] * 255).to(torch.uint8).numpy())
    result = metrics.compute()
    assert 0.0 <= result["MAE"] <= 1.0 and np.isfinite(result["maxFm"])
    return result


@pytest.mark.slow  # the 24 cases take minutes on one CPU core
@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("backbone", list(FAMILIES))
def test_matrix_trains_a_step_and_evaluates(backbone: str, network: str) -> None:
    train_step_and_evaluate(network, backbone, FAMILIES[backbone])


def test_one_transformer_case_in_the_fast_suite() -> None:
    """The matrix's machinery on one transformer family, outside the slow marker."""
    train_step_and_evaluate("f3net", "pvt_v2_b0", 64)


@pytest.mark.parametrize("backbone", list(FAMILIES))
def test_info_on_the_demo_recipe(backbone: str, capsys) -> None:
    code = main(["info", str(ROOT / "configs" / "demo.yaml"), f"model.backbone={backbone}",
                 "model.pretrained=null", "data.size=64"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "strides [4, 8, 16, 32]" in out
