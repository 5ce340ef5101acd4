"""``model.checkpointing: all`` on ``birefnet``: every Swin (pad-first windows) / PVTv2 block of
both backbone runs and every part of the decoder (squeeze, levels with their lateral inputs,
image inputs, ASPP-deformable, gradient reference branch, the full-size output block, the
gradient targets) runs as checkpoint segments; the step's loss, every gradient and every
BatchNorm statistic are bit for bit those of the plain step, gradient outputs included."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from sodkit.backbone.swin_windows import PadFirstSwinBlock
from sodkit.config import LossCfg, ModelCfg
from sodkit.engine.memory import SavedTensors
from sodkit.loss import build_criterion
from sodkit.module.aspp import DeformConv2d
from sodkit.module.grad_checkpoint import is_checkpointed
from sodkit.network import build_network


def _model(backbone: str, mode: str) -> torch.nn.Module:
    torch.manual_seed(0)
    # drop-path on, as the original trains (random, like the ASPP's dropout)
    net = build_network(ModelCfg(name="birefnet", backbone=backbone, checkpointing=mode,
                                 backbone_kwargs={"drop_path_rate": 0.2}))
    net.set_gradient_outputs(True)  # the gradient branch's predictions and targets, trained
    return net.train()


def _step(model: torch.nn.Module, size: int) -> tuple[torch.Tensor, int]:
    """One forward/backward on fixed data: the pixel losses on the logits and side outputs plus
    a loss on the gradient predictions against their (not detached) targets."""
    generator = torch.Generator().manual_seed(1)
    image = torch.randn(2, 3, size, size, generator=generator)
    mask = (torch.rand(2, 1, size, size, generator=generator) > 0.5).float()
    torch.manual_seed(2)  # dropout (ASPP) and drop-path draw the same in both runs
    with SavedTensors(model) as saved:
        out = model(image)
        loss = build_criterion(LossCfg())(out, mask)[0]
        for pred, target in zip(out["gradient"], out["gradient_target"], strict=True):
            pred = F.interpolate(pred, size=target.shape[-2:], mode="bilinear")
            loss = loss + F.binary_cross_entropy_with_logits(pred, target.sigmoid())
    loss.backward()
    return loss.detach(), saved.nbytes


@pytest.mark.slow  # two BiRefNets (Swin-T: 44M parameters) built and stepped
@pytest.mark.parametrize("backbone,blocks", [("pvt_v2_b0", 8),
                                             ("swin_tiny_patch4_window7_224", 12)])
def test_checkpointed_step_is_the_plain_step_bit_for_bit(backbone: str, blocks: int) -> None:
    size = 64  # Swin: 16 x 16 tokens, not whole 7 x 7 windows: the pad-before-shift path
    plain, ckpt = _model(backbone, "off"), _model(backbone, "all")
    body = ckpt.backbone.body
    found = [m for m in body.modules() if type(m).__name__ in ("Block", "PadFirstSwinBlock")]
    assert len(found) == blocks and all(is_checkpointed(m) for m in found)
    assert all(isinstance(m, PadFirstSwinBlock) for m in found) == backbone.startswith("swin")
    loss_plain, saved_plain = _step(plain, size)
    loss_ckpt, saved_ckpt = _step(ckpt, size)
    assert torch.equal(loss_plain, loss_ckpt)
    assert saved_ckpt < 0.25 * saved_plain, (saved_ckpt, saved_plain)
    for (name, a), b in zip(plain.named_parameters(), ckpt.parameters(), strict=True):
        assert (a.grad is None) == (b.grad is None), name
        assert a.grad is None or torch.equal(a.grad, b.grad), name
    assert all(p.grad is not None for p in ckpt.gradient.parameters())  # the branch trained
    for (name, a), b in zip(plain.named_buffers(), ckpt.buffers(), strict=True):
        assert torch.equal(a, b), name  # BatchNorm statistics: updated once, the same values
    tracked = {int(b) for n, b in ckpt.named_buffers() if n.endswith("num_batches_tracked")}
    assert tracked == {1}  # the decoder's BatchNorms: once per step, not once more in backward


def test_decoder_checkpointing_keeps_no_full_size_map() -> None:
    """The output block (the finest map upsampled to the image size, joined with the image's
    own input block: the network's largest maps) is a segment too: outside the segments the
    forward keeps nothing at the image size but the image and the one-channel outputs."""
    model = _model("pvt_v2_b0", "decoder")
    kept: list[tuple[int, ...]] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        kept.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(torch.randn(2, 3, 64, 64))
    full = {shape for shape in kept if len(shape) == 4 and shape[-2:] == (64, 64)}
    assert full and all(shape[1] <= 3 for shape in full), full


def test_deformable_convolution_runs_under_cpu_bf16_autocast() -> None:
    """torchvision has no bf16 CPU kernel: the op runs in float32 and returns bf16, as its
    CUDA autocast rule does; values equal float32's to bf16 rounding."""
    torch.manual_seed(0)
    conv = DeformConv2d(8, 16, 3)
    with torch.no_grad():
        conv.offset.bias.uniform_(-1, 1)
    x = torch.randn(2, 8, 12, 12, requires_grad=True)
    reference = conv(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = conv(torch.nn.functional.conv2d(x, torch.eye(8).view(8, 8, 1, 1)))
    assert out.dtype == torch.bfloat16
    assert torch.allclose(out.float(), reference, atol=0.05, rtol=0.02)
    out.float().sum().backward()
    assert x.grad is not None and conv.weight.grad is not None
