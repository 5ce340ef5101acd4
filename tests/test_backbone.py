"""Backbone: channels/strides from feature_info, local weights, config errors."""

from __future__ import annotations

import pytest
import timm
import torch
from safetensors.torch import save_file

from sodkit.backbone import Backbone
from sodkit.config import ConfigError, ModelCfg
from sodkit.errors import UserError

# One per timm feature wrapper: FeatureListNet (resnet), EfficientNetFeatures, FeatureListNet with
# flattened stages (convnext), FeatureGetterNet (ViT, "model." keys), channels-last (mambaout).
# timm's `test_*` models are the real architectures at toy widths: they build in milliseconds.
FAMILIES = ["resnet18", "test_efficientnet", "test_convnext", "test_vit", "test_mambaout"]


@pytest.mark.parametrize("name", FAMILIES)
def test_channels_and_strides_match_feature_shapes(name: str) -> None:
    backbone = Backbone(name).eval()
    with torch.no_grad():
        feats = backbone(torch.randn(2, 3, 64, 64))
    assert len(feats) == len(backbone.channels) == len(backbone.strides)
    for feat, channels, stride in zip(feats, backbone.channels, backbone.strides, strict=True):
        assert tuple(feat.shape) == (2, channels, 64 // stride, 64 // stride)
    assert backbone.strides == sorted(backbone.strides)  # high resolution first


def test_out_indices_select_stages() -> None:
    backbone = Backbone("resnet18", out_indices=[1, 2, 3, 4])
    assert backbone.strides == [4, 8, 16, 32]
    assert backbone.channels == [64, 128, 256, 512]
    assert Backbone.from_cfg(ModelCfg(backbone="resnet18", out_indices=[3, 4])).strides == [16, 32]


def _same_outputs(a: Backbone, b: Backbone) -> bool:
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        return all(torch.equal(fa, fb) for fa, fb in zip(a.eval()(x), b.eval()(x), strict=True))


@pytest.mark.parametrize("layout", ["plain.pth", "state_dict.pt", "model.pth", "plain.safetensors"])
def test_pretrained_round_trip(tmp_path, layout: str) -> None:
    torch.manual_seed(0)
    source = Backbone("test_resnet")
    state = {k: v.contiguous() for k, v in source.body.state_dict().items()}
    path = tmp_path / layout
    nest = layout.split(".")[0]
    if path.suffix == ".safetensors":
        save_file(state, str(path))
    else:
        torch.save(state if nest == "plain" else {nest: state, "epoch": 3}, path)
    torch.manual_seed(1)
    loaded = Backbone("test_resnet", pretrained=str(path))
    assert _same_outputs(source, loaded)


def test_classifier_checkpoint_loads_into_renamed_features_model(tmp_path) -> None:
    # convnext's features model flattens `stages.0` -> `stages_0`; DDP adds `module.`.
    classifier = timm.create_model("test_convnext", pretrained=False)
    path = tmp_path / "classifier.pth"
    torch.save({"model": {f"module.{k}": v for k, v in classifier.state_dict().items()}}, path)
    backbone = Backbone("test_convnext", pretrained=str(path))
    mine = backbone.body.state_dict()
    reference = classifier.state_dict()
    assert torch.equal(mine["stages_3.blocks.0.conv_dw.weight"],
                       reference["stages.3.blocks.0.conv_dw.weight"])
    assert torch.equal(mine["stem_0.weight"], reference["stem.0.weight"])
    for key, value in mine.items():
        classifier_key = key.replace("stem_", "stem.").replace("stages_", "stages.")
        assert torch.equal(value, reference[classifier_key])


def test_missing_weights_file_is_a_user_error(tmp_path) -> None:
    missing = tmp_path / "nope.pth"
    with pytest.raises(UserError, match="model.pretrained") as info:
        Backbone("resnet18", pretrained=str(missing))
    assert str(missing) in str(info.value)


def test_weights_matching_nothing_is_a_user_error(tmp_path) -> None:
    path = tmp_path / "other.pth"
    torch.save({"something.else": torch.zeros(3)}, path)
    with pytest.raises(UserError, match="no tensor"):
        Backbone("resnet18", pretrained=str(path))


def test_unknown_timm_name_suggests_the_closest() -> None:
    with pytest.raises(ConfigError) as info:
        Backbone("resnt50")
    expected = "model.backbone: unknown timm model 'resnt50'; did you mean 'resnet50'?"
    assert str(info.value) == expected


def test_bad_backbone_kwargs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="model.backbone"):
        Backbone("resnet18", not_an_argument=1)
