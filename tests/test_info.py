"""``sodkit info``: parameters and FLOPs equal a hand count on a tiny conv network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch.nn.functional as F
from torch import Tensor, nn

from sodkit.cli import main
from sodkit.network import NETWORKS

ROOT = Path(__file__).resolve().parents[1]


class _TinyBackbone(nn.Module):
    """One 3x3 stride-2 conv, 3 -> 4 channels: 3*4*9 weights + 4 biases = 112 parameters."""

    channels, strides = [4], [2]

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def set_checkpointing(self, enabled: bool) -> None:  # nothing worth recomputing
        pass

    def forward(self, x: Tensor) -> list[Tensor]:
        return [self.conv(x)]


class _TinyNet(nn.Module):
    """Backbone + a 1x1 head, 4 -> 1: 4 weights + 1 bias = 5 parameters."""

    def __init__(self, cfg) -> None:
        super().__init__()
        self.backbone = _TinyBackbone()
        self.head = nn.Conv2d(4, 1, 1)

    def forward(self, image: Tensor) -> dict:
        logits = self.head(self.backbone(image)[0])
        return {"logits": F.interpolate(logits, size=image.shape[-2:]), "aux": []}


@pytest.fixture
def tiny_network():
    NETWORKS.register("tiny_conv")(_TinyNet)
    yield "tiny_conv"
    NETWORKS._items.pop("tiny_conv")


def test_info_counts_equal_a_hand_count(tiny_network, capsys) -> None:
    code = main(["info", str(ROOT / "configs" / "demo.yaml"), f"model.name={tiny_network}",
                 "data.size=16", "--json"])
    assert code == 0
    info = json.loads(capsys.readouterr().out)
    assert info["parameters"] == {"total": 117, "trainable": 117, "backbone": 112, "rest": 5}
    # FLOPs = 2 x multiply-adds: the 3x3 conv gives 8x8 outputs x 4 channels x 27 inputs each,
    # the 1x1 head 8x8 outputs x 4 inputs; biases and interpolation are not counted.
    assert info["flops"] == 2 * (8 * 8 * 4 * 27) + 2 * (8 * 8 * 4)
    assert info["strides"] == [2] and info["channels"] == [4]
    assert "fpn" in info["registered"]["networks"] and "bce" in info["registered"]["losses"]
    assert "duts-tr" in info["registered"]["presets"]


def test_info_table_for_the_demo(capsys) -> None:
    assert main(["info", str(ROOT / "configs" / "demo.yaml"), "data.size=64"]) == 0
    out = capsys.readouterr().out
    assert "parameters   total 11306500" in out and "per image at 64x64" in out
    assert "strides [4, 8, 16, 32], channels [64, 128, 256, 512]" in out
