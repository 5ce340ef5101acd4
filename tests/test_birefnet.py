"""``birefnet`` is the published BiRefNet: every original tensor has its sodkit name and shape,
every module its original parameter count, the backbones the original's channels; it trains and
evaluates through the engine and ``sodkit info`` describes it.

Where the figures come from: ZhengPeng7/BiRefNet (commit 25cb930), ``BiRefNet(bb_pretrained=
False)`` built with its own Swin v1 / PVTv2 code and its config.py (the released general model's
settings, ``self.bb`` set to each backbone) under torch 2.14.1; parameters by
``sum(p.numel())`` per module; ``tests/birefnet_keys.json``: its ``state_dict()`` names and
shapes for Swin-T and PVTv2-b0. benchmarks/birefnet_parity.py loads random weights in these
names into sodkit's network and compares the outputs (docs/zoo.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from sodkit.backbone import Backbone
from sodkit.backbone.swin_windows import PadFirstSwinBlock
from sodkit.cli import main
from sodkit.config import ConfigError, LossCfg, ModelCfg, load_config
from sodkit.loss import build_criterion
from sodkit.model_file import read_model_file
from sodkit.network import build_network
from sodkit.network.birefnet import image_patches
from sodkit.published.birefnet import rename_for
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
KEYS = json.loads((Path(__file__).with_name("birefnet_keys.json")).read_text())
TIMM = {"swin_v1_t": "swin_tiny_patch4_window7_224", "swin_v1_s": "swin_small_patch4_window7_224",
        "swin_v1_b": "swin_base_patch4_window12_384",
        "swin_v1_l": "swin_large_patch4_window12_384",
        **{f"pvt_v2_b{i}": f"pvt_v2_b{i}" for i in range(6)}}
# config.py lateral_channels_in_collection (coarsest first), before mul_scl_ipt doubles them
COLLECTIONS = {"swin_v1_l": [1536, 768, 384, 192], "swin_v1_b": [1024, 512, 256, 128],
               "swin_v1_s": [768, 384, 192, 96], "swin_v1_t": [768, 384, 192, 96],
               "pvt_v2_b5": [512, 320, 128, 64], "pvt_v2_b4": [512, 320, 128, 64],
               "pvt_v2_b3": [512, 320, 128, 64], "pvt_v2_b2": [512, 320, 128, 64],
               "pvt_v2_b1": [512, 320, 128, 64], "pvt_v2_b0": [256, 160, 64, 32]}
# per module of the original: bb (with Swin's norm0-3), squeeze_module, ipt_blk1..5,
# decoder_block1..4, lateral_block2..4, conv_out1, conv_ms_spvn_2..4, gdt_convs(_pred, _attn)_2..4
ORIGINAL = {
    "swin_v1_t": {"bb": 27_520_698, "squeeze": 4_109_556,
                  "ipt": [15_640, 55_408, 166_048, 553_216, 1_880_320],
                  "dec": [1_755_156, 1_948_980, 2_336_628, 3_001_332],
                  "lat": [37_056, 147_840, 590_592], "head": 121, "ms": [193, 385, 769],
                  "gdt": [27_730, 55_378, 110_674], "total": 44_313_720},
    "pvt_v2_b0": {"bb": 3_409_760, "squeeze": 2_447_604,
                  "ipt": [6_408, 36_944, 133_736, 479_360, 1_806_464],
                  "dec": [1_625_940, 1_695_156, 1_856_628, 2_078_388],
                  "lat": [4_160, 16_512, 102_720], "head": 41, "ms": [65, 129, 321],
                  "gdt": [9_298, 18_514, 46_162], "total": 15_774_310},
    "swin_v1_l": {"bb": 195_201_204, "squeeze": 6_657_780,
                  "ipt": [29_488, 83_104, 221_440, 664_000, 1_991_104],
                  "dec": [1_948_980, 2_336_628, 3_111_924, 4_441_332],
                  "lat": [147_840, 590_592, 2_360_832], "head": 241, "ms": [385, 769, 1_537],
                  "gdt": [55_378, 110_674, 221_266], "total": 220_176_498},
}


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _meta(backbone: str, **birefnet) -> nn.Module:
    with torch.device("meta"):
        cfg = ModelCfg(name="birefnet", backbone=TIMM.get(backbone, backbone))
        if birefnet:
            cfg = load_config(None, [f"model.birefnet.{k}={v}" for k, v in birefnet.items()]
                              + ["model.name=birefnet", f"model.backbone={cfg.backbone}"]).model
        return build_network(cfg)


@pytest.fixture(scope="module")
def tiny() -> nn.Module:
    torch.manual_seed(0)
    return build_network(ModelCfg(name="birefnet", backbone="pvt_v2_b0"))


@pytest.mark.parametrize("backbone", sorted(COLLECTIONS))
def test_backbones_give_the_original_channel_collections(backbone: str) -> None:
    with torch.device("meta"):
        levels = Backbone(TIMM[backbone], out_indices="auto")
    assert levels.channels == COLLECTIONS[backbone][::-1]
    assert levels.strides == [4, 8, 16, 32]


@pytest.mark.parametrize("backbone", ["swin_v1_t", "pvt_v2_b0"])
def test_every_original_tensor_has_its_sodkit_name_and_shape(backbone: str) -> None:
    """One to one: each tensor of the original's state dict (but Swin's recomputed
    relative_position_index buffers) renames to a distinct sodkit tensor of its shape, and
    every sodkit tensor comes from one."""
    rename = rename_for("swin" if backbone.startswith("swin") else "pvt")
    mine = _meta(backbone).state_dict()
    renamed = {rename(k): shape for k, shape in KEYS[backbone].items()}
    dropped = [k for k in KEYS[backbone] if rename(k) == ""]
    assert all(k.endswith("relative_position_index") for k in dropped)
    assert len(renamed) - ("" in renamed) == len(KEYS[backbone]) - len(dropped)
    renamed.pop("", None)
    assert sorted(set(renamed) - set(mine)) == []
    assert sorted(set(mine) - set(renamed)) == []
    assert {k: list(mine[k].shape) for k in renamed} == renamed


@pytest.mark.parametrize("backbone", ["swin_v1_t", "pvt_v2_b0", "swin_v1_l"])
def test_modules_have_the_original_parameter_counts(backbone: str) -> None:
    figures = ORIGINAL[backbone]
    net = _meta(backbone)
    assert _count(net.backbone) + _count(net.backbone_norms or nn.ModuleList()) == figures["bb"]
    assert _count(net.squeeze) == figures["squeeze"]
    assert [_count(m) for m in net.image_inputs] == figures["ipt"]
    assert [_count(m) for m in net.decoders] == figures["dec"]
    assert [_count(m) for m in net.laterals] == figures["lat"]
    assert _count(net.head) == figures["head"]
    assert [_count(m) for m in net.side_heads] == figures["ms"]
    assert [_count(m) for m in net.gradient] == figures["gdt"]
    assert _count(net) == figures["total"]


def test_outputs_at_every_level(tiny: nn.Module) -> None:
    """Side outputs of the three coarser levels (coarse to fine); in training, with gradient
    outputs on, their gradient logits and targets (image size)."""
    image = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = tiny.eval()(image)
        assert tuple(out["logits"].shape) == (2, 1, 64, 64) and len(out["aux"]) == 3
        assert "gradient" not in out
        tiny.set_gradient_outputs(True)
        try:
            out = tiny.train()(image)
        finally:
            tiny.set_gradient_outputs(False)
            tiny.eval()
    assert tuple(out["logits"].shape) == (2, 1, 64, 64)
    assert [tuple(a.shape) for a in out["aux"]] == [(2, 1, 2, 2), (2, 1, 4, 4), (2, 1, 8, 8)]
    assert [tuple(g.shape) for g in out["gradient"]] == [(2, 1, 2, 2), (2, 1, 4, 4),
                                                         (2, 1, 8, 8)]
    assert [tuple(t.shape) for t in out["gradient_target"]] == [(2, 1, 64, 64)] * 3


def test_sides_that_are_not_multiples_of_32(tiny: nn.Module) -> None:
    with torch.no_grad():
        out = tiny.eval()(torch.randn(1, 3, 72, 88))
    assert tuple(out["logits"].shape) == (1, 1, 72, 88)


def test_image_patches_are_the_originals_channel_major_grid() -> None:
    image = torch.arange(2 * 4 * 4, dtype=torch.float32).reshape(1, 2, 4, 4)
    patches = image_patches(image, (2, 2), 2)
    assert patches.shape == (1, 8, 2, 2)
    # channel 0's top-left patch, then its top-right, bottom-left, bottom-right; then channel 1
    assert patches[0, 0].tolist() == [[0, 1], [4, 5]]
    assert patches[0, 1].tolist() == [[2, 3], [6, 7]]
    assert patches[0, 2].tolist() == [[8, 9], [12, 13]]
    assert patches[0, 4].tolist() == [[16, 17], [20, 21]]
    # a level whose patches do not tile the image: resized to grid x the level's size first
    assert image_patches(torch.randn(1, 3, 72, 88), (3, 3), 32).shape == (1, 3 * 32 * 32, 3, 3)


def test_swin_blocks_pad_before_the_shift() -> None:
    """Same as timm's block where the map is whole windows; where it is not, the padding is
    shifted with the map (the detection code's order), which changes the output."""
    torch.manual_seed(0)
    net = _meta("swin_v1_t")
    blocks = [m for m in net.modules() if isinstance(m, PadFirstSwinBlock)]
    assert len(blocks) == 12 and all(b.window_size == (7, 7) for b in blocks)
    assert [b.shift_size for b in blocks[-2:]] == [(0, 0), (3, 3)]  # kept on 7x7 maps too
    from timm.models.swin_transformer import SwinTransformerBlock

    timm_block = SwinTransformerBlock(16, (14, 14), num_heads=2, window_size=7, shift_size=3,
                                      always_partition=True, dynamic_mask=True).eval()
    ours = SwinTransformerBlock(16, (14, 14), num_heads=2, window_size=7, shift_size=3,
                                always_partition=True, dynamic_mask=True).eval()
    ours.load_state_dict(timm_block.state_dict())
    ours.__class__ = PadFirstSwinBlock
    timm_block, ours = timm_block.double(), ours.double()  # the bound is float64 round-off
    with torch.no_grad():
        whole = torch.randn(1, 14, 14, 16, dtype=torch.float64)
        torch.testing.assert_close(ours(whole), timm_block(whole), rtol=0, atol=1e-12)
        padded = torch.randn(1, 11, 11, 16, dtype=torch.float64)
        assert (ours(padded) - timm_block(padded)).abs().max() > 1e-3


def test_options_are_config_keys_and_checked() -> None:
    cfg = load_config(None, ["model.name=birefnet", "model.birefnet.dec_att=ASPP",
                             "model.birefnet.dec_blk=ResBlk", "model.birefnet.cxt_num=1"])
    assert (cfg.model.birefnet.dec_att, cfg.model.birefnet.cxt_num) == ("ASPP", 1)
    with pytest.raises(ConfigError, match="model.birefnet.dec_att"):
        load_config(None, ["model.birefnet.dec_att=ASPPDeform"])
    with pytest.raises(ConfigError, match="model.birefnet.cxt_num"):
        load_config(None, ["model.birefnet.cxt_num=4"])
    with pytest.raises(ConfigError, match="out_ref needs ms_supervision"):
        _meta("pvt_v2_b0", ms_supervision="false")


@pytest.mark.parametrize("options", [
    {"mul_scl_ipt": "add", "cxt_num": 1, "dec_att": "ASPP", "dec_blk": "ResBlk"},
    {"mul_scl_ipt": "", "dec_ipt": "false", "out_ref": "false", "ms_supervision": "false"},
    {"dec_ipt_split": "false", "dec_att": "", "squeeze_block": "ASPPDeformable_x3", "cxt_num": 0},
])
def test_other_options_build_and_run(options: dict) -> None:
    cfg = load_config(None, [f"model.birefnet.{k}={v}" for k, v in options.items()]
                      + ["model.name=birefnet", "model.backbone=resnet18"]).model
    torch.manual_seed(0)
    net = build_network(cfg).train()
    out = net(torch.randn(2, 3, 64, 64))
    total, _ = build_criterion(LossCfg())(out, (torch.rand(2, 1, 64, 64) > 0.5).float())
    total.backward()
    assert tuple(out["logits"].shape) == (2, 1, 64, 64)
    assert len(out["aux"]) == net.side_outputs == (0 if "ms_supervision" in options else 3)
    for name, param in net.named_parameters():
        assert (param.grad is not None) == param.requires_grad, name


def test_gradient_predictions_train_only_when_asked(tiny: nn.Module) -> None:
    """Off (the default), the gradient ``pred`` convs are frozen: every trainable parameter
    gets a gradient from the usual loss (DDP); on, they are trainable."""
    frozen = [n for n, p in tiny.named_parameters() if not p.requires_grad]
    assert frozen == [f"gradient.{i}.pred.{leaf}" for i in range(3)
                      for leaf in ("weight", "bias")]
    tiny.set_gradient_outputs(True)
    try:
        assert all(p.requires_grad for p in tiny.parameters())
    finally:
        tiny.set_gradient_outputs(False)


def test_info_counts_the_original_parameters(capsys) -> None:
    code = main(["info", str(ROOT / "configs" / "demo.yaml"), "model.name=birefnet",
                 "model.backbone=pvt_v2_b0", "data.size=64", "--json"])
    assert code == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["total"] == ORIGINAL["pvt_v2_b0"]["total"]
    assert info["strides"] == [4, 8, 16, 32] and info["channels"] == [32, 64, 160, 256]
    assert "birefnet" in info["registered"]["networks"]


@pytest.mark.slow
def test_trains_and_evaluates_through_the_engine(data_root: Path, tmp_path: Path) -> None:
    overrides = tiny_overrides(data_root, tmp_path, "birefnet", epochs=1) + [
        "model.name=birefnet", "model.backbone=pvt_v2_b0", "model.pretrained=null",
        "train.steps_per_epoch=2", "loss.terms={bce: 1, iou: 1, ssim: 1}"]
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0
    run = tmp_path / "birefnet"
    assert (run / "checkpoints" / "last.pt").is_file()
    results = json.loads((run / "results.json").read_text())
    assert list(results) == ["DUTS-TE"]
    assert 0.0 <= results["DUTS-TE"]["MAE"] <= 1.0 and 0.0 <= results["DUTS-TE"]["maxFm"] <= 1.0


@pytest.mark.slow
def test_import_weights_converts_a_file_in_the_originals_names(tmp_path: Path) -> None:
    """``import-weights birefnet`` on a Swin-T state dict in the original's names (DDP's
    ``module.`` prefix, Swin's relative_position_index buffers included): every weight lands
    under its sodkit name; the recipe comes from --recipe (the published one is item 2's)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: b\nmodel: {name: birefnet, backbone: swin_tiny_patch4_window7_224}"
                      "\ndata: {size: 64}\n")
    generator = torch.Generator().manual_seed(0)
    state = {k: torch.zeros(shape, dtype=torch.long) if k.endswith(
        ("relative_position_index", "num_batches_tracked")) else torch.randn(
        shape, generator=generator) for k, shape in KEYS["swin_v1_t"].items()}
    source = tmp_path / "BiRefNet-swin_v1_t.pth"
    torch.save({f"module.{k}": v for k, v in state.items()}, source)
    out = tmp_path / "birefnet.safetensors"
    assert main(["import-weights", "birefnet", str(source), "--out", str(out),
                 "--recipe", str(recipe)]) == 0
    weights = read_model_file(out)["model"]
    pairs = {"backbone_norms.0.weight": "bb.norm0.weight",
             "backbone.body.layers_1.downsample.reduction.weight":
                 "bb.layers.0.downsample.reduction.weight",
             "decoders.3.context.branches.3.0.offset.weight":
                 "decoder.decoder_block4.dec_att.aspp_deforms.2.atrous_conv.offset_conv.weight",
             "squeeze.0.context.fuse.1.running_var": "squeeze_module.0.dec_att.bn1.running_var",
             "image_inputs.4.0.weight": "decoder.ipt_blk5.conv1.weight",
             "gradient.2.attn.bias": "decoder.gdt_convs_attn_4.0.bias"}
    for ours, theirs in pairs.items():
        assert torch.equal(weights[ours], state[theirs]), ours
    assert not any("relative_position_index" in k for k in weights)
