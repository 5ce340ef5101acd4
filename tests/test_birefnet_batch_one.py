"""BiRefNet at a per-process batch of one image (2048 px training on a 24 GB GPU): the original
builds its decoder without BatchNorm then (``nn.BatchNorm2d(...) if config.batch_size > 1 else
nn.Identity()``, 13 places in models/), because the ASPP's image-pooled branch has one value per
channel. ``model.birefnet.batchnorm: auto`` does the same from ``data.batch_size``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from sodkit.config import LossCfg, load_config
from sodkit.loss import build_criterion
from sodkit.network import build_network

DEMO = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
SMALL = ["model.name=birefnet", "model.backbone=pvt_v2_b0", "model.pretrained=null"]


def _cfg(*overrides: str):
    return load_config(DEMO, [*SMALL, *overrides])


def test_auto_follows_the_batch_and_is_stored_resolved() -> None:
    assert _cfg("data.batch_size=1").model.birefnet.batchnorm is False
    assert _cfg("data.batch_size=2").model.birefnet.batchnorm is True
    assert _cfg("data.batch_size=1", "model.birefnet.batchnorm=true").model.birefnet.batchnorm \
        is True


def _step(model: nn.Module) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    image = torch.randn(1, 3, 64, 64, generator=generator)
    mask = (torch.rand(1, 1, 64, 64, generator=generator) > 0.5).float()
    loss = build_criterion(LossCfg(), model)(model.train()(image), mask)[0]
    loss.backward()
    return loss


def test_a_batch_of_one_trains_without_decoder_batchnorm() -> None:
    net = build_network(_cfg("data.batch_size=1").model)
    outside = [name for name, m in net.named_modules()
               if isinstance(m, nn.BatchNorm2d) and not name.startswith("backbone")]
    assert outside == []
    assert torch.isfinite(_step(net))
    assert all(p.grad is not None for n, p in net.named_parameters()
               if n.startswith("decoders.") and p.requires_grad)
    # with BatchNorm, one image's 1x1 pooled map cannot be normalised: why the original drops it
    with_bn = build_network(_cfg("data.batch_size=1", "model.birefnet.batchnorm=true").model)
    assert any(isinstance(m, nn.BatchNorm2d) for m in with_bn.decoders.modules())
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        _step(with_bn)
