"""BiRefNet's FLOPs at 1024 px are the original's, op by op, with the deformable convolutions
and the attention counted (sodkit/engine/flops.py); ``sodkit info`` reports them.

Where the figures come from: ``benchmarks/birefnet_size.py`` on ZhengPeng7/BiRefNet (commit
25cb930, its config.py as released, ``self.bb`` set to each backbone), built on the meta device
and counted in eval mode (one 1024 x 1024 image) by ``FlopCounterMode`` with sodkit's extra
formulas; 2 FLOPs per multiply-add. On the meta device both codes' attention runs as matrix
products (``aten.bmm``); on the CPU, PVTv2's runs as the fused kernel, counted the same.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import ModelCfg
from sodkit.engine.flops import flops_by_op
from sodkit.network import build_network

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from birefnet_size import analytic_attention, analytic_deform  # noqa: E402

TIMM = {"swin_v1_t": "swin_tiny_patch4_window7_224", "pvt_v2_b0": "pvt_v2_b0",
        "swin_v1_l": "swin_large_patch4_window12_384"}
ATTENTION = ("aten.bmm", "aten._scaled_dot_product_flash_attention_for_cpu")
# the original's forward at 1024 px, by op (eval mode: no side outputs)
ORIGINAL = {
    "swin_v1_l": {"aten.convolution": 355_926_343_680, "aten.addmm": 1_885_407_805_440,
                  "attention": 84_180_860_928, "aten.mm": 36_238_786_560,
                  "torchvision.deform_conv2d": 173_140_869_120},
    "swin_v1_t": {"aten.convolution": 221_742_170_112, "aten.addmm": 229_852_938_240,
                  "attention": 8_157_714_432, "aten.mm": 9_059_696_640,
                  "torchvision.deform_conv2d": 173_140_869_120},
    "pvt_v2_b0": {"aten.convolution": 155_122_466_816, "aten.addmm": 12_855_541_760,
                  "attention": 35_366_371_328, "aten.mm": 8_808_038_400,
                  "torchvision.deform_conv2d": 173_140_869_120},
}
SWIN_L_TOTAL = 2_534_894_665_728  # the original's, Swin-L at 1024 px


@pytest.mark.parametrize("backbone", [
    "swin_v1_t", "pvt_v2_b0",
    pytest.param("swin_v1_l", marks=pytest.mark.slow)])  # 197M-parameter Swin-L: ~8 s loaded
def test_flops_at_1024_are_the_originals_op_by_op(backbone: str) -> None:
    with torch.device("meta"):
        net = build_network(ModelCfg(name="birefnet", backbone=TIMM[backbone]))
    net.set_aux_outputs(False)  # as the original in eval mode: no side outputs
    counts = flops_by_op(net, torch.zeros(1, 3, 1024, 1024, device="meta"))
    grouped = {"attention": sum(counts.pop(op, 0) for op in ATTENTION), **counts}
    assert grouped == ORIGINAL[backbone]
    # an analytic count from the architecture alone agrees with the counted ops
    assert grouped["torchvision.deform_conv2d"] == analytic_deform(1024)
    assert grouped["attention"] == analytic_attention(backbone, 1024)


@pytest.mark.slow  # builds Swin-L twice (parameters, FLOPs), on the meta device
def test_info_reports_swin_l_at_1024_within_the_originals_size(capsys) -> None:
    code = main(["info", str(ROOT / "configs" / "demo.yaml"), "model.name=birefnet",
                 f"model.backbone={TIMM['swin_v1_l']}", "model.pretrained=null",
                 "data.size=1024", "--json"])
    assert code == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"]["total"] == 220_176_498
    # + the three side heads (the demo's loss trains them): 22,020,096 FLOPs, 0.001%
    assert info["flops"] == SWIN_L_TOTAL + 22_020_096
    assert abs(info["flops"] / SWIN_L_TOTAL - 1) <= 0.02
