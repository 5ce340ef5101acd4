"""The options the published recipes need: F3Net's triangular schedule and per-epoch LR, weight
decay on every parameter, frozen parameters, random crop and binarised masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from sodkit.config import ConfigError, ModelCfg, OptimCfg, ScheduleCfg
from sodkit.config.schema import DataCfg
from sodkit.data import build_train_transform
from sodkit.data.transforms import random_crop
from sodkit.network import build_network
from sodkit.optim import build_optimizer, build_scheduler, lr_factor_fn


def _lrs(schedule: ScheduleCfg, steps_per_epoch: int, epochs: int) -> list[float]:
    param = nn.Parameter(torch.zeros(2, 2))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scheduler = build_scheduler(optimizer, schedule, steps_per_epoch, epochs)
    lrs = []
    for _ in range(steps_per_epoch * epochs):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_f3net_triangular_schedule_per_epoch() -> None:
    """F3Net's train.py sets lr = (1 - |(epoch + 1) / (E + 1) * 2 - 1|) * base each epoch."""
    epochs, steps = 32, 3
    lrs = _lrs(ScheduleCfg(name="triangular", interval="epoch"), steps, epochs)
    for epoch in range(epochs):
        expected = 1 - abs((epoch + 1) / (epochs + 1) * 2 - 1)
        assert lrs[epoch * steps: (epoch + 1) * steps] == pytest.approx([expected] * steps)
    assert max(lrs) == pytest.approx(32 / 33) and lrs[0] == pytest.approx(2 / 33)


def test_minet_poly_per_epoch() -> None:
    """MINet's LambdaLR, stepped once per epoch: (1 - epoch / E) ** 0.9."""
    lrs = _lrs(ScheduleCfg(name="poly", power=0.9, interval="epoch"), 4, 50)
    assert lrs[::4] == pytest.approx([(1 - e / 50) ** 0.9 for e in range(50)])
    assert len(set(lrs[4:8])) == 1


def test_triangular_per_step_and_bad_interval() -> None:
    factor = lr_factor_fn(ScheduleCfg(name="triangular"), 5, 2)
    assert [factor(i) for i in range(10)] == pytest.approx(
        [1 - abs(2 * (i + 1) / 11 - 1) for i in range(10)])
    with pytest.raises(ConfigError, match="schedule.interval: 'iter'"):
        lr_factor_fn(ScheduleCfg(interval="iter"), 5, 2)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def model() -> nn.Module:
    return build_network(ModelCfg(backbone="resnet18", decoder_channels=8, out_indices=[1, 2]))


def test_decay_all_puts_every_parameter_under_weight_decay(model: nn.Module) -> None:
    groups = build_optimizer(model, OptimCfg(name="sgd", weight_decay=5e-4, decay_all=True),
                             8).param_groups
    assert {g["name"] for g in groups} == {"backbone", "decoder"}
    assert all(g["weight_decay"] == 5e-4 for g in groups)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


def test_freeze_by_prefix_leaves_the_stem_out_of_training() -> None:
    cfg = ModelCfg(backbone="resnet18", decoder_channels=8, out_indices=[1, 2],
                   freeze=["backbone.body.conv1", "backbone.body.bn1"])
    net = build_network(cfg)
    frozen = {name for name, p in net.named_parameters() if not p.requires_grad}
    assert frozen == {"backbone.body.conv1.weight", "backbone.body.bn1.weight",
                      "backbone.body.bn1.bias"}
    optimized = {id(p) for g in build_optimizer(net, OptimCfg(), 8).param_groups
                 for p in g["params"]}
    assert not optimized & {id(p) for p in net.parameters() if not p.requires_grad}
    net.train()(torch.randn(2, 3, 32, 32))["logits"].sum().backward()
    assert net.backbone.body.conv1.weight.grad is None
    assert int(net.backbone.body.bn1.num_batches_tracked) == 1  # statistics still update
    with pytest.raises(ConfigError, match=r"model.freeze: 'backbone.conv1' matches no .*did you "
                                          r"mean 'backbone.body.conv1'"):
        build_network(ModelCfg(backbone="resnet18", decoder_channels=8,
                               freeze=["backbone.conv1"]))


@pytest.mark.parametrize(("backbone", "stem"), [
    ("resnet18", {"conv1.weight", "bn1.weight", "bn1.bias"}),  # F3Net's conv1 / bn1
    ("efficientnet_b0", {"conv_stem.weight", "bn1.weight", "bn1.bias"}),
    ("convnext_atto", {"stem_0.weight", "stem_0.bias", "stem_1.weight", "stem_1.bias"}),
    ("pvt_v2_b0", {"patch_embed.proj.weight", "patch_embed.proj.bias",
                   "patch_embed.norm.weight", "patch_embed.norm.bias"}),
])
def test_freeze_backbone_stem_is_the_familys_stem(backbone: str, stem: set[str]) -> None:
    """`model.freeze: [backbone.stem]` (F3Net's recipe) names the stem as timm's group_matcher
    does, so the recipe runs on any family with no other key."""
    net = build_network(ModelCfg(name="f3net", backbone=backbone, decoder_channels=8,
                                 freeze=["backbone.stem"]))
    frozen = {name for name, p in net.named_parameters() if not p.requires_grad}
    assert frozen == {f"backbone.body.{name}" for name in stem}
    assert not net.backbone.frozen


def test_random_crop_bounds_and_alignment() -> None:
    image = np.arange(80 * 64 * 3, dtype=np.int64).reshape(80, 64, 3).astype(np.uint8)
    mask = np.arange(80 * 64, dtype=np.int64).reshape(80, 64)
    torch.manual_seed(0)
    shapes = set()
    for _ in range(200):
        img, msk = random_crop(image, mask, 0.125)
        assert 70 < img.shape[0] <= 80 and 56 < img.shape[1] <= 64  # cut < 80/8, < 64/8
        assert img.shape[:2] == msk.shape
        top, left = divmod(int(msk[0, 0]), 64)
        np.testing.assert_array_equal(msk, mask[top:top + msk.shape[0], left:left + msk.shape[1]])
        np.testing.assert_array_equal(img, image[top:top + msk.shape[0],
                                                 left:left + msk.shape[1]])
        shapes.add(img.shape[:2])
    assert len(shapes) > 20  # the cut is drawn, not fixed


def test_binarised_masks_and_crop_in_the_train_transform() -> None:
    image = np.full((40, 40, 3), 128, np.uint8)
    mask = np.zeros((40, 40), np.uint8)
    mask[10:30, 10:30] = 255
    mask[10:30, 9] = 100  # a soft edge
    cfg = DataCfg(hflip=0, rotation=15, color_jitter=0, binarize=0.5, crop=0.125)
    torch.manual_seed(1)
    _, msk = build_train_transform(cfg)(image, mask, 24)
    assert msk.shape == (1, 24, 24) and set(msk.unique().tolist()) == {0.0, 1.0}
    soft = build_train_transform(DataCfg(hflip=0, rotation=15, color_jitter=0))(image, mask, 24)
    assert len(soft[1].unique()) > 2


@pytest.mark.parametrize("key,value,message", [
    ("crop", 1.0, "data.crop"), ("binarize", 0.0, "data.binarize")])
def test_bad_data_options_are_config_errors(tmp_path, key, value, message) -> None:
    from sodkit.config import load_config
    path = tmp_path / "c.yaml"
    path.write_text("data: {}\n")
    with pytest.raises(ConfigError, match=message):
        load_config(path, [f"data.{key}={value}"])
