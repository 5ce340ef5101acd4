"""Parameter groups, LR scaling, and per-step schedules (values at known steps, exact resume)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from sodkit.config import ModelCfg, OptimCfg, ScheduleCfg
from sodkit.network import build_network
from sodkit.optim import build_optimizer, build_scheduler, scaled_lr


@pytest.fixture(scope="module")
def model() -> nn.Module:
    return build_network(ModelCfg(backbone="test_efficientnet", decoder_channels=8))


def test_param_groups(model: nn.Module) -> None:
    cfg = OptimCfg(name="adamw", lr=1e-3, backbone_lr_factor=0.1, weight_decay=0.05)
    groups = {g["name"]: g for g in build_optimizer(model, cfg, 8).param_groups}
    assert set(groups) == {"backbone", "backbone_no_decay", "decoder", "decoder_no_decay"}
    seen = [id(p) for g in groups.values() for p in g["params"]]
    assert len(seen) == len(set(seen)) == len(list(model.parameters()))
    backbone_ids = {id(p) for p in model.backbone.parameters()}
    for name, group in groups.items():
        in_backbone = {id(p) in backbone_ids for p in group["params"]}
        assert in_backbone == {name.startswith("backbone")}
        assert group["lr"] == pytest.approx(1e-4 if name.startswith("backbone") else 1e-3)
        no_decay = name.endswith("no_decay")
        assert group["weight_decay"] == (0.0 if no_decay else 0.05)
        assert all((p.ndim <= 1) == no_decay for p in group["params"])
    norm_params = {id(p) for m in model.modules() if isinstance(m, nn.BatchNorm2d)
                   for p in m.parameters()}
    assert norm_params <= {id(p) for p in groups["decoder_no_decay"]["params"]} | {
        id(p) for p in groups["backbone_no_decay"]["params"]}


def test_frozen_params_are_left_out(model: nn.Module) -> None:
    for p in model.backbone.parameters():
        p.requires_grad_(False)
    try:
        names = [g["name"] for g in build_optimizer(model, OptimCfg(), 8).param_groups]
    finally:
        for p in model.backbone.parameters():
            p.requires_grad_(True)
    assert names == ["decoder", "decoder_no_decay"]


@pytest.mark.parametrize(("rule", "factor"), [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
def test_lr_scaling(model: nn.Module, rule: str, factor: float) -> None:
    cfg = OptimCfg(lr=0.01, lr_scaling=rule, base_batch_size=8, backbone_lr_factor=0.5)
    assert scaled_lr(cfg, 32) == pytest.approx(0.01 * factor)
    groups = {g["name"]: g["lr"] for g in build_optimizer(model, cfg, 32).param_groups}
    assert groups["decoder"] == pytest.approx(0.01 * factor)
    assert groups["backbone"] == pytest.approx(0.005 * factor)


def test_optimizer_kinds(model: nn.Module) -> None:
    sgd = build_optimizer(model, OptimCfg(name="sgd", momentum=0.8, nesterov=True), 8)
    assert isinstance(sgd, torch.optim.SGD)
    assert sgd.defaults["momentum"] == 0.8 and sgd.defaults["nesterov"]
    adam = build_optimizer(model, OptimCfg(name="adam", betas=[0.8, 0.99]), 8)
    assert type(adam) is torch.optim.Adam and adam.defaults["betas"] == (0.8, 0.99)
    assert type(build_optimizer(model, OptimCfg(name="adamw"), 8)) is torch.optim.AdamW


def _optimizer() -> torch.optim.Optimizer:
    """Two groups with different base LRs, like backbone and decoder."""
    return torch.optim.SGD([{"params": [nn.Parameter(torch.zeros(1))], "lr": 0.1},
                            {"params": [nn.Parameter(torch.zeros(1))], "lr": 1.0}], lr=1.0)


def _lrs(cfg: ScheduleCfg, steps: int, steps_per_epoch: int = 10, epochs: int = 10) -> list:
    """LR of both groups used at optimizer steps 0..steps (inclusive)."""
    opt = _optimizer()
    sched = build_scheduler(opt, cfg, steps_per_epoch, epochs)
    out = []
    for _ in range(steps + 1):
        out.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    return out


def test_warmup_then_poly() -> None:
    cfg = ScheduleCfg(name="poly", warmup_epochs=2, warmup_factor=0.1, power=0.9,
                      min_lr_factor=0.05)
    lrs = _lrs(cfg, 100)
    assert lrs[0] == pytest.approx([0.01, 0.1])  # warm-up start: lr * warmup_factor
    assert lrs[10] == pytest.approx([0.055, 0.55])  # half-way through warm-up
    assert lrs[20] == pytest.approx([0.1, 1.0])  # end of warm-up: the full LR
    middle = 0.05 + 0.95 * 0.5**0.9  # poly half-way through the remaining 80 steps
    assert lrs[60] == pytest.approx([0.1 * middle, middle])
    assert lrs[100] == pytest.approx([0.005, 0.05])  # end: lr * min_lr_factor
    assert all(a[0] / a[1] == pytest.approx(0.1) for a in lrs)  # the group ratio holds


def test_cosine() -> None:
    lrs = _lrs(ScheduleCfg(name="cosine", min_lr_factor=0.1), 100)
    assert lrs[0] == pytest.approx([0.1, 1.0])  # no warm-up
    assert lrs[50][1] == pytest.approx(0.1 + 0.9 * 0.5)
    assert lrs[25][1] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert lrs[100][1] == pytest.approx(0.1)


def test_step_milestones_and_constant() -> None:
    lrs = _lrs(ScheduleCfg(name="step", milestones=[3, 7.5], gamma=0.1), 100)
    assert lrs[29][1] == pytest.approx(1.0)
    assert lrs[30][1] == pytest.approx(0.1)
    assert lrs[74][1] == pytest.approx(0.1)
    assert lrs[75][1] == pytest.approx(0.01)
    const = _lrs(ScheduleCfg(name="constant", warmup_epochs=0.5, warmup_factor=0.0), 50)
    assert const[0][1] == 0.0 and const[5][1] == pytest.approx(1.0) and const[50][1] == 1.0


@pytest.mark.parametrize("optimizer_first", [True, False])
def test_scheduler_resume_is_exact(optimizer_first: bool) -> None:
    cfg = ScheduleCfg(name="poly", warmup_epochs=1, power=2.0)
    opt, reference_lrs = _optimizer(), []
    sched = build_scheduler(opt, cfg, 10, 5)
    for _ in range(13):
        opt.step()
        sched.step()
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    for _ in range(20):
        reference_lrs.append([g["lr"] for g in opt.param_groups])
        opt.step()
        sched.step()
    resumed = _optimizer()
    if optimizer_first:  # optimizer state loaded before the scheduler is even built
        resumed.load_state_dict(opt_state)
        resumed_sched = build_scheduler(resumed, cfg, 10, 5)
    else:  # the usual order: build both, then load both
        resumed_sched = build_scheduler(resumed, cfg, 10, 5)
        resumed.load_state_dict(opt_state)
    resumed_sched.load_state_dict(sched_state)
    for expected in reference_lrs:
        assert [g["lr"] for g in resumed.param_groups] == expected
        resumed.step()
        resumed_sched.step()


def test_negative_milestones_count_from_the_end() -> None:
    """``milestones: [-N]`` decays the last N epochs; per epoch, as BiRefNet's MultiStepLR
    (train.py: milestone ``epochs + lde + 1`` for ``lr_decay_epochs = [lde]``, stepped once an
    epoch), whose ``-N`` decays the last N - 1 epochs: ours ``-(N - 1)`` gives its LRs."""
    cfg = ScheduleCfg(name="step", milestones=[-3], gamma=0.5, interval="epoch")
    lrs = [lr[1] for lr in _lrs(cfg, 99)[::10]]  # the decoder's LR in each of the 10 epochs
    assert lrs == pytest.approx([1.0] * 7 + [0.5] * 3)
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    original = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[10 - 4 + 1], gamma=0.5)
    theirs = []
    for _ in range(10):
        theirs.append(opt.param_groups[0]["lr"])
        opt.step()
        original.step()
    ours = _lrs(ScheduleCfg(name="step", milestones=[-3], gamma=0.5, interval="epoch"), 99)
    assert [lr[1] for lr in ours[::10]] == pytest.approx(theirs)
    never = _lrs(ScheduleCfg(name="step", milestones=[1e5], gamma=0.5, interval="epoch"), 99)
    assert {lr[1] for lr in never} == {1.0}  # BiRefNet's lr_decay_epochs = [1e5]: no decay
