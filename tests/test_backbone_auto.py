"""``model.out_indices: auto`` (the default): each network's strides picked from timm's
``feature_info`` for any family; explicit lists and null unchanged; one-line refusals."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sodkit.config import ModelCfg, load_config
from sodkit.errors import ConfigError
from sodkit.network import build_network

ROOT = Path(__file__).resolve().parents[1]


def _strides(name: str, backbone: str, **kw) -> list[int]:
    return build_network(ModelCfg(name=name, backbone=backbone, decoder_channels=8, **kw)
                         ).backbone.strides


def test_auto_is_the_default_and_parses() -> None:
    assert ModelCfg().out_indices == "auto"
    assert load_config(ROOT / "configs" / "duts_fpn_r50.yaml").model.out_indices == "auto"
    cfg = load_config(ROOT / "configs" / "demo.yaml", ["model.out_indices=null"])
    assert cfg.model.out_indices is None
    with pytest.raises(ConfigError, match="model.out_indices"):
        load_config(ROOT / "configs" / "demo.yaml", ["model.out_indices=autoo"])
    with pytest.raises(ConfigError, match=r"model.out_indices.0: must be >= 0"):
        load_config(ROOT / "configs" / "demo.yaml", ["model.out_indices=[-1]"])


@pytest.mark.parametrize(("network", "backbone", "strides"), [
    ("fpn", "resnet18", [4, 8, 16, 32]),  # P2-P5, as the demo's [1, 2, 3, 4]
    ("minet", "resnet18", [2, 4, 8, 16, 32]),  # MINet_Res50's five levels
    ("f3net", "resnet18", [4, 8, 16, 32]),  # F3Net: out2..out5
    ("fpn", "convnext_atto", [4, 8, 16, 32]),
    ("f3net", "efficientnet_b0", [4, 8, 16, 32]),
    ("minet", "swin_tiny_patch4_window7_224", [4, 8, 16, 32]),
    ("fpn", "pvt_v2_b0", [4, 8, 16, 32]),
])
def test_auto_picks_the_network_strides(network: str, backbone: str, strides: list[int]) -> None:
    assert _strides(network, backbone) == strides


@pytest.mark.parametrize(("recipe", "strides"), [
    ("duts_minet_r50.yaml", [2, 4, 8, 16, 32]),  # MINet_Res50: all five levels
    ("duts_f3net_r50.yaml", [4, 8, 16, 32]),  # F3Net: out2..out5
    ("duts_fpn_r50.yaml", [4, 8, 16, 32]),
    ("finetune_custom.yaml", [4, 8, 16, 32]),  # the demo's fpn
    ("demo.yaml", [4, 8, 16, 32]),
])
def test_every_recipe_takes_its_original_levels_with_auto(recipe: str, strides: list[int]
                                                          ) -> None:
    """No recipe pins its levels, so swapping model.backbone needs no other key, and `auto`
    still gives each published network the levels of its original code."""
    cfg = load_config(ROOT / "configs" / recipe, ["model.pretrained=null",
                                                  "model.init_from=null"])
    assert cfg.model.out_indices == "auto"
    assert build_network(cfg.model).backbone.strides == strides


def test_explicit_out_indices_and_null_are_kept() -> None:
    assert _strides("fpn", "resnet18", out_indices=[1, 2, 3, 4]) == [4, 8, 16, 32]
    assert _strides("f3net", "resnet18", out_indices=[0, 1, 2, 3, 4]) == [2, 4, 8, 16, 32]
    assert _strides("fpn", "resnet18", out_indices=None) == [2, 4, 8, 16, 32]


def test_a_family_without_the_strides_is_refused_in_one_line() -> None:
    """A ResNet at output stride 16 has no stride-32 map: the message says what it gives."""
    with pytest.raises(ConfigError) as info:
        build_network(ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8,
                               backbone_kwargs={"output_stride": 16}))
    message = str(info.value)
    assert "\n" not in message
    assert "'resnet18' gives feature maps at strides [2, 4, 8, 16]" in message
    assert "needs strides [4, 8, 16, 32] (missing [32])" in message


def test_optional_strides_are_taken_where_the_family_has_them() -> None:
    from sodkit.backbone.levels import StrideNeed, pick_indices

    need = StrideNeed(required=(8, 16), optional=(2, 32))
    levels = [(2, 8), (4, 16), (8, 32), (8, 48), (16, 64)]  # two levels at stride 8: the deeper
    assert pick_indices("x", levels, need) == [0, 3, 4]


def test_a_size_the_family_cannot_take_is_one_line_naming_the_fix(capsys) -> None:
    """MaxViT's windows fix its input size: built for 224 px (an explicit size key), `sodkit
    info` at 64 px says what to set."""
    from sodkit.cli import main

    code = main(["info", str(ROOT / "configs" / "demo.yaml"), "model.backbone=maxvit_tiny_tf_224",
                 "model.pretrained=null", "data.size=64", "model.backbone_kwargs={img_size: 224}"])
    err = capsys.readouterr().err
    assert code == 2
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    assert "maxvit_tiny_tf_224 cannot take 64x64 inputs" in lines[0]
    assert "model.backbone_kwargs={img_size: 64}" in lines[0]
    assert main(["info", str(ROOT / "configs" / "demo.yaml"), "model.backbone=maxvit_tiny_tf_224",
                 "model.pretrained=null", "data.size=64",
                 "model.backbone_kwargs={img_size: 64}"]) == 0


def test_a_fixed_size_family_is_built_for_data_size_with_no_extra_key(capsys) -> None:
    """MaxViT / CoAtNet take `img_size` from `data.size` (sodkit/config/derived.py), so the
    published recipes run on them with model.backbone alone; multi-scale is refused in one
    line."""
    import timm

    from sodkit.cli import main
    from sodkit.config.derived import is_fixed_size

    # the names sodkit recognises are exactly timm's maxxvit module
    fixed = set(timm.list_models(module="maxxvit"))
    assert fixed and all(is_fixed_size(name) for name in fixed)
    assert not any(is_fixed_size(name) for name in set(timm.list_models()) - fixed)

    cfg = load_config(ROOT / "configs" / "duts_minet_r50.yaml",
                      ["model.backbone=maxvit_tiny_tf_224.in1k", "data.size=96"])
    assert cfg.model.backbone_kwargs == {"img_size": 96}
    cfg = dataclasses.replace(cfg.model, pretrained=None, decoder_channels=8)
    assert build_network(cfg).backbone.strides == [2, 4, 8, 16, 32]
    assert main(["info", str(ROOT / "configs" / "demo.yaml"), "model.backbone=test_maxvit",
                 "model.pretrained=null", "data.size=64"]) == 0

    code = main(["info", str(ROOT / "configs" / "duts_f3net_r50.yaml"),
                 "model.backbone=coatnet_0_rw_224", "model.pretrained=null"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "error:" in ln]
    assert code == 2 and len(lines) == 1
    assert "data.size_list: coatnet_0_rw_224 is built for one input size" in lines[0]
