"""Plain ViTs (DeiT, DINOv2 with register tokens, SAM's encoder): ``out_indices: auto`` sets
``dynamic_img_size``, pads inputs to whole patches and builds a simple feature pyramid at the
strides the network declares."""

from __future__ import annotations

import math

import pytest
import torch

from sodkit.backbone import Backbone
from sodkit.backbone.levels import STRIDES_4_TO_32
from sodkit.backbone.pyramid import SimpleFeaturePyramid
from sodkit.config import ModelCfg, OptimCfg
from sodkit.network import build_network
from sodkit.optim import param_groups


@pytest.fixture(scope="module")
def dinov2_reg() -> Backbone:
    """DINOv2-S with a class token and 4 register tokens, patch 14."""
    return Backbone("vit_small_patch14_reg4_dinov2", out_indices="auto",
                    need=STRIDES_4_TO_32).eval()


def test_plain_vit_gets_strides_4_to_32(dinov2_reg: Backbone) -> None:
    assert dinov2_reg.strides == [4, 8, 16, 32]
    assert isinstance(dinov2_reg.pyramid, SimpleFeaturePyramid)
    assert dinov2_reg.body.model.dynamic_img_size is True  # set automatically
    assert dinov2_reg.channels == [96, 192, 384, 384]


@pytest.mark.parametrize("size", [(64, 64), (70, 98), (57, 41)])
def test_any_size_is_padded_to_whole_patches(dinov2_reg: Backbone, size) -> None:
    with torch.no_grad():
        feats = dinov2_reg(torch.randn(1, 3, *size))
    for feat, stride, chans in zip(feats, dinov2_reg.strides, dinov2_reg.channels, strict=True):
        assert tuple(feat.shape) == (1, chans, math.ceil(size[0] / stride),
                                     math.ceil(size[1] / stride))


def test_prefix_tokens_are_dropped_from_the_map(dinov2_reg: Backbone) -> None:
    """1 class + 4 register tokens precede the patch tokens; the map holds only the patches,
    equal to the model's own normed patch tokens laid out on the grid."""
    model = dinov2_reg.body.model
    assert model.num_prefix_tokens == 5
    image = torch.randn(1, 3, 70, 56)  # whole patches: 5 x 4
    with torch.no_grad():
        tokens = model.forward_features(image)  # (1, 5 + 20, 384), normed
        feat = dinov2_reg.body(image)[-1]
    assert tuple(feat.shape) == (1, 384, 5, 4)
    grid = tokens[:, 5:].reshape(1, 5, 4, 384).permute(0, 3, 1, 2)
    torch.testing.assert_close(feat, grid)


def test_the_pyramid_learns_at_the_decoder_lr() -> None:
    """The pyramid is new (random) layers: not the pretrained encoder's reduced lr."""
    model = build_network(ModelCfg(name="fpn", backbone="test_vit", decoder_channels=8))
    groups = param_groups(model, 1.0, OptimCfg(backbone_lr_factor=0.1))
    lr_of = {id(p): g["lr"] for g in groups for p in g["params"]}
    assert {lr_of[id(p)] for p in model.backbone.pyramid.parameters()} == {1.0}
    assert {lr_of[id(p)] for p in model.backbone.body.parameters()} == {0.1}


@pytest.mark.parametrize("network", ["fpn", "minet", "f3net"])
def test_every_network_on_a_plain_vit(network: str) -> None:
    model = build_network(ModelCfg(name=network, backbone="test_vit", decoder_channels=8))
    out = model(torch.randn(2, 3, 72, 72))
    assert tuple(out["logits"].shape) == (2, 1, 72, 72)
    out["logits"].mean().backward()
    assert all(p.grad is not None for p in model.backbone.pyramid.parameters())
