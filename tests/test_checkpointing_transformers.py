"""``model.checkpointing: backbone`` on transformer families: every block of Swin, PVTv2 and a
plain ViT (SAM's too) is checkpointed; the step's peak is lower and the gradients are those of
the plain step, bit for bit (no BatchNorm in these blocks: no reordered sums either)."""

from __future__ import annotations

import pytest
import torch

from sodkit.backbone import grad_checkpoint
from sodkit.config import LossCfg, ModelCfg
from sodkit.engine.memory import AllocatedPeak
from sodkit.loss import build_criterion
from sodkit.module.grad_checkpoint import is_checkpointed
from sodkit.network import build_network


def _model(backbone: str, mode: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_network(ModelCfg(name="fpn", backbone=backbone, decoder_channels=8,
                                  checkpointing=mode)).train()


def _peak_and_grads(backbone: str, mode: str, size: int) -> tuple[int, list, int]:
    model = _model(backbone, mode)
    generator = torch.Generator().manual_seed(1)
    image = torch.randn(2, 3, size, size, generator=generator)
    mask = (torch.rand(2, 1, size, size, generator=generator) > 0.5).float()
    criterion = build_criterion(LossCfg())
    with AllocatedPeak() as peak:
        criterion(model(image), mask)[0].backward()
    blocks = sum(is_checkpointed(m) for m in model.backbone.body.modules())
    return peak.added_bytes, [p.grad for p in model.parameters()], blocks


def _check(backbone: str, size: int, blocks: int) -> None:
    plain_peak, plain_grads, none = _peak_and_grads(backbone, "off", size)
    peak, grads, checkpointed = _peak_and_grads(backbone, "backbone", size)
    assert none == 0 and checkpointed == blocks
    assert peak < plain_peak, (peak, plain_peak)
    for a, b in zip(plain_grads, grads, strict=True):
        assert torch.equal(a, b)


def test_vit_blocks_checkpointed_lower_peak_same_gradients() -> None:
    _check("test_vit", 128, blocks=len(_model("test_vit", "off").backbone.body.model.blocks))


@pytest.mark.slow  # Swin-T: 28M parameters, two steps
def test_swin_blocks_checkpointed_lower_peak_same_gradients() -> None:
    _check("swin_tiny_patch4_window7_224", 96, blocks=2 + 2 + 6 + 2)


@pytest.mark.parametrize("backbone", ["pvt_v2_b0", "samvit_base_patch16"])
def test_every_transformer_block_is_found(backbone: str) -> None:
    model = _model(backbone, "backbone")
    blocks = [m for m in model.backbone.body.modules() if type(m).__name__ in
              ("Block", "SwinTransformerBlock")]
    assert blocks and all(is_checkpointed(b) for b in blocks)


def test_timm_granularity_reaches_a_wrapped_model() -> None:
    model = _model("test_vit", "off")
    model.backbone.set_checkpointing(True, "timm")
    assert model.backbone.body.model.grad_checkpointing is True
    grad_checkpoint.disable(model.backbone.body)
    assert model.backbone.body.model.grad_checkpointing is False


def test_sodkit_blocks_equal_timms_own_checkpointing_on_a_vit() -> None:
    """Where timm has ``set_grad_checkpointing`` (a ViT), sodkit's per-block checkpointing is
    the same segmentation: the gradients equal timm's bit for bit and the peak is no higher.
    sodkit keeps its own mechanism because timm's recomputation counts BatchNorm statistics
    twice in CNN families (sodkit/backbone/grad_checkpoint.py)."""
    def run(granularity: str) -> tuple[int, list]:
        model = _model("test_vit", "off")
        model.backbone.set_checkpointing(True, granularity)
        generator = torch.Generator().manual_seed(1)
        image = torch.randn(2, 3, 128, 128, generator=generator)
        mask = (torch.rand(2, 1, 128, 128, generator=generator) > 0.5).float()
        with AllocatedPeak() as peak:
            build_criterion(LossCfg())(model(image), mask)[0].backward()
        return peak.added_bytes, [p.grad for p in model.parameters()]

    timm_peak, timm_grads = run("timm")
    peak, grads = run("block")
    assert peak <= timm_peak, (peak, timm_peak)
    for a, b in zip(timm_grads, grads, strict=True):
        assert torch.equal(a, b)
