"""``minet`` and ``f3net`` are the published networks: parameters of every module, output shapes
at every level, and totals checked against figures measured from the authors' released code.

Where the figures come from: lartpang/MINet (``code/network/MINet.py``, ``MINet_Res50``,
commit 0f4ecf7) and weijun88/F3Net (``src/net.py``, ``F3Net``), built with their own ResNet-50
(no pretrained weights) under torch 2.14.1; parameters by ``sum(p.numel())`` per module, shapes
by forward hooks on one 320 x 320 (MINet) or 352 x 352 (F3Net) image, FLOPs by
``torch.utils.flop_counter`` (2 per multiply-add). The same script loaded the originals' weights
into these networks: outputs equal to 0.0 (docs/zoo.md, benchmarks/original_parity.py).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from sodkit.config import ModelCfg
from sodkit.network import build_network

pytestmark = pytest.mark.slow  # the originals' ResNet-50 networks, built and run at 320-352 px
RESNET50 = 23_508_032  # both originals' ResNet-50 without its classifier = timm's features

# MINet_Res50: trans.conv0..4 (AIM), sim2..sim32, upconv2..upconv32, upconv1, classifier
MINET_AIM = [447_872, 903_104, 10_214_400, 40_482_560, 85_674_240]
MINET_SIM = 194_464  # each of the five
MINET_UPCONV = [18_496, 36_992, 36_992, 36_992, 36_992]  # upconv2 (64 -> 32), upconv4..32
MINET_FINAL, MINET_CLASSIFIER = 9_280, 33  # upconv1 at full resolution, 1x1 classifier
MINET_TOTAL, MINET_GFLOPS = 162_378_305, 173.739264
# forward hooks at 320 x 320 (channels, height, width), level of stride 2 first
MINET_AIM_SHAPES = [(64, 160, 160), (64, 80, 80), (64, 40, 40), (64, 20, 20), (64, 10, 10)]
MINET_UPCONV_SHAPES = [(32, 160, 160), (64, 80, 80), (64, 40, 40), (64, 20, 20), (64, 10, 10)]

# F3Net: squeeze2..5, one CFM (each decoder has three), heads linearp1/p2, linearr2..5
F3NET_SQUEEZE = [16_576, 32_960, 65_728, 131_264]
F3NET_CFM, F3NET_HEAD = 296_448, 577
F3NET_TOTAL, F3NET_GFLOPS = 25_536_710, 32.680872576
# at 352 x 352: squeezed maps and each head's output before the upsampling to 352
F3NET_LEVEL_SIZES = [88, 44, 22, 11]


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _forward_with_shapes(net: nn.Module, modules: dict[str, nn.Module], size: int
                         ) -> tuple[dict, dict[str, tuple], int]:
    shapes: dict[str, tuple] = {}
    hooks = [m.register_forward_hook(
        lambda _m, _i, out, name=name: shapes.__setitem__(name, tuple(out.shape[1:])))
        for name, m in modules.items()]
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            outputs = net.eval()(torch.randn(1, 3, size, size))
    finally:
        for hook in hooks:
            hook.remove()
    return outputs, shapes, counter.get_total_flops()


@pytest.fixture(scope="module")
def minet() -> nn.Module:
    # out_indices as configs/duts_minet_r50.yaml: all five levels (MINet_Res50 uses stride 2)
    return build_network(ModelCfg(name="minet", backbone="resnet50", decoder_channels=64,
                                  out_indices=None), aux_outputs=False)


@pytest.fixture(scope="module")
def f3net() -> nn.Module:
    return build_network(ModelCfg(name="f3net", backbone="resnet50", decoder_channels=64,
                                  out_indices=[1, 2, 3, 4]))


def test_minet_r50_modules_match_the_original(minet: nn.Module) -> None:
    assert _count(minet.backbone) == RESNET50
    assert [_count(level) for level in minet.aim] == MINET_AIM
    assert [_count(sim) for sim in minet.sims] == [MINET_SIM] * 5
    assert [_count(up) for up in minet.upconvs] == MINET_UPCONV
    assert (_count(minet.final), _count(minet.classifier)) == (MINET_FINAL, MINET_CLASSIFIER)
    # beyond the original: four 1x1 side heads (deep supervision), not computed here
    assert _count(minet) - _count(minet.side_heads) == MINET_TOTAL
    assert _count(minet.side_heads) == 4 * 65


def test_minet_r50_shapes_and_flops_match_the_original(minet: nn.Module) -> None:
    modules = {f"aim{i}": m for i, m in enumerate(minet.aim)}
    modules |= {f"up{i}": m for i, m in enumerate(minet.upconvs)}
    modules |= {"final": minet.final}
    outputs, shapes, flops = _forward_with_shapes(minet, modules, 320)
    assert [shapes[f"aim{i}"] for i in range(5)] == MINET_AIM_SHAPES
    assert [shapes[f"up{i}"] for i in range(5)] == MINET_UPCONV_SHAPES
    assert shapes["final"] == (32, 320, 320)
    assert tuple(outputs["logits"].shape) == (1, 1, 320, 320) and outputs["aux"] == []
    assert flops / 1e9 == pytest.approx(MINET_GFLOPS, rel=1e-6)


def test_f3net_r50_modules_match_the_original(f3net: nn.Module) -> None:
    assert _count(f3net.backbone) == RESNET50
    assert [_count(s) for s in f3net.squeeze] == F3NET_SQUEEZE
    assert len(f3net.decoder1) == len(f3net.decoder2) == 3
    assert {_count(cfm) for cfm in [*f3net.decoder1, *f3net.decoder2]} == {F3NET_CFM}
    heads = [f3net.head, f3net.head1, *f3net.side_heads]
    assert [_count(h) for h in heads] == [F3NET_HEAD] * 6
    assert _count(f3net) == F3NET_TOTAL


def test_f3net_r50_shapes_and_flops_match_the_original(f3net: nn.Module) -> None:
    modules = {f"squeeze{i}": m for i, m in enumerate(f3net.squeeze)}
    modules |= {f"side{i}": m for i, m in enumerate(f3net.side_heads)}
    modules |= {"p1": f3net.head1, "p2": f3net.head}
    outputs, shapes, flops = _forward_with_shapes(f3net, modules, 352)
    assert [shapes[f"squeeze{i}"] for i in range(4)] == [(64, s, s) for s in F3NET_LEVEL_SIZES]
    assert [shapes[f"side{i}"] for i in range(4)] == [(1, s, s) for s in F3NET_LEVEL_SIZES]
    assert shapes["p1"] == shapes["p2"] == (1, 88, 88)
    assert tuple(outputs["logits"].shape) == (1, 1, 352, 352)
    # aux: r5, r4, r3, r2 (coarse to fine), then p1; the loss upsamples them (aux_upsample)
    assert [tuple(a.shape[-2:]) for a in outputs["aux"]] == [(11, 11), (22, 22), (44, 44),
                                                              (88, 88), (88, 88)]
    assert flops / 1e9 == pytest.approx(F3NET_GFLOPS, rel=1e-6)
