"""Every registered network: output contract, gradients everywhere, odd input sizes."""

from __future__ import annotations

import pytest
import torch

from sodkit.config import ConfigError, LossCfg, ModelCfg
from sodkit.loss import build_criterion
from sodkit.network import NETWORKS, build_network

FROZEN_BY_DEFAULT = {"birefnet": [f"gradient.{i}.pred.{leaf}" for i in range(3)
                                   for leaf in ("weight", "bias")]}


def _check_outputs(outputs: dict, batch: int, height: int, width: int) -> None:
    assert tuple(outputs["logits"].shape) == (batch, 1, height, width)
    assert isinstance(outputs["aux"], list)
    for side in outputs["aux"]:
        assert side.ndim == 4 and side.shape[:2] == (batch, 1)
        assert side.shape[-2] <= height and side.shape[-1] <= width


@pytest.mark.parametrize("size", [(64, 64), (72, 88)])
@pytest.mark.parametrize("name", NETWORKS.names())
def test_forward_backward(name: str, size: tuple[int, int]) -> None:
    torch.manual_seed(0)
    model = build_network(ModelCfg(name=name, backbone="resnet18", decoder_channels=16)).train()
    image = torch.randn(2, 3, *size)
    mask = (torch.rand(2, 1, *size) > 0.5).float()
    outputs = model(image)
    _check_outputs(outputs, 2, *size)
    total, _ = build_criterion(LossCfg())(outputs, mask)
    total.backward()
    # frozen by design: BiRefNet's gradient predictions train only with a loss that supervises
    # them (set_gradient_outputs); every other parameter of every network trains
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen == FROZEN_BY_DEFAULT.get(name, [])
    backbone_ids = {id(p) for p in model.backbone.parameters()}
    decoder = [p for p in model.parameters() if id(p) not in backbone_ids and p.requires_grad]
    assert decoder, "a network needs decoder parameters outside .backbone"
    for group in (list(model.backbone.parameters()), decoder):
        for param in group:
            assert param.grad is not None and torch.isfinite(param.grad).all()
        assert any(param.grad.abs().sum() > 0 for param in group)


@pytest.mark.parametrize("name", NETWORKS.names())
def test_equal_stride_backbone(name: str) -> None:
    # A ViT's levels are all at stride 16 (taken as they are with out_indices null, not through
    # the pyramid `auto` builds): the decoder must not assume halving sizes.
    model = build_network(ModelCfg(name=name, backbone="test_vit", decoder_channels=8,
                                   out_indices=None)).eval()
    with torch.no_grad():
        _check_outputs(model(torch.randn(1, 3, 64, 64)), 1, 64, 64)


@pytest.mark.parametrize("name", ["fpn", "minet"])
def test_top_down_aux_is_coarse_to_fine(name: str) -> None:
    model = build_network(ModelCfg(name=name, backbone="resnet18", decoder_channels=8,
                                   out_indices=None)).eval()  # all five levels
    with torch.no_grad():
        outputs = model(torch.randn(1, 3, 64, 64))
    assert [side.shape[-1] for side in outputs["aux"]] == [2, 4, 8, 16]  # strides 32..4


def test_unknown_network_name() -> None:
    with pytest.raises(ConfigError, match=r"model.name: unknown network 'fpm'; did you mean 'fpn'"):
        build_network(ModelCfg(name="fpm", backbone="resnet18"))


@pytest.mark.parametrize("name", NETWORKS.names())
def test_without_aux_outputs_every_trainable_parameter_gets_a_gradient(name: str) -> None:
    """loss.aux_weight=0: DDP (find_unused_parameters=False) needs a gradient for every
    trainable parameter, so the side outputs are not computed and their heads are frozen."""
    torch.manual_seed(0)
    cfg = ModelCfg(name=name, backbone="resnet18", decoder_channels=16)
    full = build_network(cfg).eval()
    lean = build_network(cfg, aux_outputs=False).eval()
    lean.load_state_dict(full.state_dict())  # same parameters: checkpoints are interchangeable
    image = torch.randn(2, 3, 64, 64)
    outputs = lean(image)
    assert outputs["aux"] == []
    torch.testing.assert_close(outputs["logits"], full(image)["logits"], rtol=0, atol=0)
    lean.train()
    total, parts = build_criterion(LossCfg(aux_weight=0.0))(lean(image), torch.rand(2, 1, 64, 64))
    total.backward()
    assert "aux" not in parts
    for pname, param in lean.named_parameters():
        assert (param.grad is not None) == param.requires_grad, pname
    assert any(not p.requires_grad for p in lean.parameters())


def test_f3net_aux_holds_decoder2_levels_then_p1() -> None:
    model = build_network(ModelCfg(name="f3net", backbone="resnet18", decoder_channels=8,
                                   out_indices=None)).eval()  # all five levels
    with torch.no_grad():
        outputs = model(torch.randn(1, 3, 64, 64))
    # decoder 2's refined maps at strides 32..2, then p1 (decoder 1's final map, stride 2)
    assert [side.shape[-1] for side in outputs["aux"]] == [2, 4, 8, 16, 32, 32]
