"""Training transformers: ``optim.layer_decay`` gives each backbone parameter timm's
``param_groups_layer_decay`` learning rate; no weight decay on position embeddings, tokens and
norms; a frozen encoder keeps its norm layers in eval mode."""

from __future__ import annotations

import logging

import pytest
import timm
import torch
from timm.optim import param_groups_layer_decay

from sodkit.backbone.weights import canonical_key
from sodkit.config import ModelCfg, OptimCfg
from sodkit.network import build_network
from sodkit.optim import build_optimizer, param_groups


def _timm_rules(name: str, layer_decay: float, weight_decay: float) -> dict[str, tuple]:
    """canonical name -> (lr scale, weight decay), from timm on the classifier model."""
    ref = timm.create_model(name)
    groups = param_groups_layer_decay(ref, weight_decay=weight_decay,
                                      no_weight_decay_list=list(ref.no_weight_decay())
                                      if hasattr(ref, "no_weight_decay") else [],
                                      layer_decay=layer_decay)
    names = {id(p): n for n, p in ref.named_parameters()}
    return {canonical_key(names[id(p)]): (g["lr_scale"], g["weight_decay"])
            for g in groups for p in g["params"]}


@pytest.mark.parametrize("backbone", ["test_vit", "convnext_atto"])
def test_each_backbone_lr_is_timms(backbone: str) -> None:
    model = build_network(ModelCfg(name="fpn", backbone=backbone, decoder_channels=8))
    cfg = OptimCfg(lr=2.0, backbone_lr_factor=0.1, weight_decay=0.05, layer_decay=0.6)
    groups = param_groups(model, 2.0, cfg)
    rule_of = {id(p): (g["lr"], g["weight_decay"]) for g in groups for p in g["params"]}
    ref = _timm_rules(backbone, 0.6, 0.05)
    body = list(model.backbone.body.named_parameters())
    for name, param in body:
        scale, decay = ref[canonical_key(name)]
        assert rule_of[id(param)] == (pytest.approx(2.0 * 0.1 * scale), decay), name
    assert len({rule_of[id(p)][0] for _, p in body}) > 3  # layers really differ
    names = [g["name"] for g in groups]
    assert "backbone_layer0" in names and len(names) == len(set(names))
    decoder = [p for n, p in model.named_parameters() if not n.startswith("backbone.body.")]
    assert {rule_of[id(p)][0] for p in decoder} == {2.0}


def test_no_weight_decay_on_position_embedding_tokens_and_norms() -> None:
    model = build_network(ModelCfg(name="fpn", backbone="vit_small_patch14_reg4_dinov2",
                                   decoder_channels=8))
    groups = param_groups(model, 1.0, OptimCfg(weight_decay=0.05))  # no layer decay
    decay_of = {id(p): g["weight_decay"] for g in groups for p in g["params"]}
    vit = model.backbone.body.model
    for param in (vit.pos_embed, vit.cls_token, vit.reg_token, vit.blocks[-1].norm2.weight,
                  vit.blocks[0].norm1.weight, vit.blocks[0].attn.qkv.bias):
        assert decay_of[id(param)] == 0.0
    assert decay_of[id(vit.blocks[0].attn.qkv.weight)] == 0.05
    assert {g["lr"] for g in groups} == {1.0, 0.1}  # without layer_decay: two learning rates


def test_the_groups_are_logged(caplog) -> None:
    model = build_network(ModelCfg(name="fpn", backbone="test_vit", decoder_channels=8))
    with caplog.at_level(logging.INFO, logger="sodkit.optim"):
        build_optimizer(model, OptimCfg(lr=1.0, layer_decay=0.5, backbone_lr_factor=1.0), 8)
    assert "group backbone_layer0: lr " in caplog.text
    assert "group decoder: lr 1, weight decay" in caplog.text


def test_a_frozen_encoder_keeps_its_norm_layers_in_eval_mode() -> None:
    model = build_network(ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8,
                                   freeze=["backbone.body"])).train()
    bn = model.backbone.body.bn1
    before = bn.running_mean.clone()
    model(torch.randn(2, 3, 64, 64))
    assert not bn.training and torch.equal(bn.running_mean, before)
    assert model.laterals[0].training  # the decoder trains
    # a partly frozen encoder (F3Net's stem) keeps updating its statistics, as the original
    stem = build_network(ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8,
                                  freeze=["backbone.body.conv1", "backbone.body.bn1"])).train()
    before = stem.backbone.body.bn1.running_mean.clone()
    stem(torch.randn(2, 3, 64, 64))
    assert stem.backbone.body.bn1.training
    assert not torch.equal(stem.backbone.body.bn1.running_mean, before)
