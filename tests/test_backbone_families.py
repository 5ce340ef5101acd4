"""Backbone families at 64 x 64, pretrained weights from files and from the timm hub."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from safetensors.torch import save_file

from sodkit.backbone import Backbone
from sodkit.config import LossCfg, ModelCfg
from sodkit.errors import UserError
from sodkit.loss import build_criterion
from sodkit.network import build_network
from tests import processes

# The smallest model of each family in the installed timm (pretrained=False: random weights).
FAMILIES = ["resnet18", "res2net50_14w_8s", "convnext_atto", "efficientnet_b0", "pvt_v2_b0",
            "swin_tiny_patch4_window7_224"]


@pytest.mark.parametrize("backbone", FAMILIES)
def test_family_forward_backward_at_64(backbone: str) -> None:
    torch.manual_seed(0)
    model = build_network(ModelCfg(name="fpn", backbone=backbone, decoder_channels=8)).train()
    image = torch.randn(2, 3, 64, 64)
    outputs = model(image)
    assert tuple(outputs["logits"].shape) == (2, 1, 64, 64)
    total, _ = build_criterion(LossCfg())(outputs, (torch.rand(2, 1, 64, 64) > 0.5).float())
    total.backward()
    grads = [p.grad for p in model.backbone.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


def test_swin_takes_any_input_size_without_kwargs() -> None:
    backbone = Backbone("swin_tiny_patch4_window7_224").eval()
    with torch.no_grad():
        for size in [(64, 64), (72, 88)]:
            feats = backbone(torch.randn(1, 3, *size))
            assert feats[0].shape[-2:] == (size[0] // 4, size[1] // 4)


def test_swin_keeps_an_explicit_img_size() -> None:
    backbone = Backbone("swin_tiny_patch4_window7_224", img_size=64)
    with pytest.raises(Exception, match="doesn't match"):
        backbone(torch.randn(1, 3, 96, 96))


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_round_trip_is_exact(tmp_path, suffix: str) -> None:
    torch.manual_seed(0)
    source = Backbone("resnet18")
    state = {k: v.contiguous() for k, v in source.body.state_dict().items()}
    path = tmp_path / f"w{suffix}"
    save_file(state, str(path)) if suffix == ".safetensors" else torch.save(state, path)
    torch.manual_seed(1)
    loaded = Backbone("resnet18", pretrained=str(path))
    for key, value in loaded.body.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_mismatched_file_fails_with_key_counts(tmp_path) -> None:
    path = tmp_path / "resnet26.pth"  # bottleneck blocks: other shapes under the same names
    torch.save(Backbone("resnet26").body.state_dict(), path)
    with pytest.raises(UserError) as info:
        Backbone("resnet18", pretrained=str(path))
    message = str(info.value)
    n18 = len(Backbone("resnet18").body.state_dict())
    assert "does not fit timm model 'resnet18': " in message
    assert f" of {n18} tensors match" in message and "with other shapes" in message
    partial = tmp_path / "partial.pth"
    state = Backbone("resnet18").body.state_dict()
    dropped = [k for k in state if k.startswith("layer4.")]
    torch.save({k: v for k, v in state.items() if k not in dropped}, partial)
    counted = [k for k in dropped if not k.endswith("num_batches_tracked")]  # counters: harmless
    with pytest.raises(UserError, match=rf"{n18 - len(dropped)} of {n18} tensors match, "
                                        rf"{len(counted)} missing from the file"):
        Backbone("resnet18", pretrained=str(partial))


@pytest.mark.slow
def test_hub_unreachable_is_one_line_naming_the_ways_out() -> None:
    """`pretrained: timm` goes through timm's hub; without a network the error says what to do.
    (HF_HUB_OFFLINE only skips huggingface_hub's retries: the failure path is the same.)"""
    code = ("from sodkit.backbone import Backbone\n"
            "from sodkit.errors import UserError\n"
            "try:\n    Backbone('resnet18', pretrained='timm')\n"
            "except UserError as e:\n    print('MESSAGE', e)\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": "/nonexistent-sodkit-test"}
    result = processes.run([sys.executable, "-c", code], env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("MESSAGE")]
    assert len(lines) == 1, result.stdout + result.stderr
    message = lines[0]
    assert "model.pretrained: timm: cannot get 'resnet18'" in message
    assert "model.pretrained=/path/to/weights.pth" in message
    assert "model.pretrained=null" in message
