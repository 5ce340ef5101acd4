"""Gradient checkpointing: same gradients, BatchNorm statistics updated once, less saved memory."""

from __future__ import annotations

import pytest
import torch

from sodkit.config import ConfigError, LossCfg, ModelCfg
from sodkit.engine.memory import SavedTensors
from sodkit.loss import build_criterion
from sodkit.module.grad_checkpoint import find_blocks, is_checkpointed
from sodkit.network import NETWORKS, build_network

MODES = ["backbone", "decoder", "all"]
# test_resnet (timm's 0.38M-parameter ResNet; resnet18's 11.2M cost 4-5 s of CPU a case and
# prove nothing more): BatchNorm everywhere, a FeatureListNet body with a stem; test_convnext:
# BN-free LayerNorm blocks in stage modules; test_efficientnet: BatchNormAct2d in nested
# Sequentials.
BACKBONES = ["test_resnet", "test_convnext", "test_efficientnet"]


def _model(name: str, backbone: str, mode: str) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = ModelCfg(name=name, backbone=backbone, decoder_channels=8, checkpointing=mode)
    return build_network(cfg)


# birefnet also runs its backbone on the half-size image: 16 px is below test_convnext's reach
# (64 px there); the other backbones take 32 px as the other networks do (at 64 px birefnet's
# cases took 9.0 and 5.2 s of CPU with resnet18 and test_efficientnet)
SIZE = {("birefnet", "test_convnext"): 64}


def _steps(model: torch.nn.Module, steps: int = 1, size: int = 32) -> torch.Tensor:
    """``steps`` forward/backward passes on fixed data (no optimizer: gradients accumulate)."""
    criterion = build_criterion(LossCfg())
    generator = torch.Generator().manual_seed(1)
    torch.manual_seed(2)  # dropout (birefnet's ASPP) draws the same masks in every run
    for _ in range(steps):
        image = torch.randn(2, 3, size, size, generator=generator)
        mask = (torch.rand(2, 1, size, size, generator=generator) > 0.5).float()
        loss, _ = criterion(model(image), mask)
        loss.backward()
    return loss.detach()


class ImageConvSums:
    """For each convolution that reads the image (its input needs no gradient: the only kind
    that ``channel_split`` computes per output-channel group), the sum of the absolute values
    of the products that make each element of its weight gradient: ``conv2d_weight(|x|, |dy|)``.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.sums: dict[str, tuple[torch.Tensor, int]] = {}  # weight name -> (sums, terms)
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Conv2d):
                module.register_forward_hook(self._hook(f"{name}.weight"))

    def _hook(self, key: str):
        def forward(module: torch.nn.Conv2d, inputs: tuple, output: torch.Tensor) -> None:
            (x,) = inputs
            if x.requires_grad or not output.requires_grad:
                return

            def backward(dy: torch.Tensor) -> None:
                sums = torch.nn.grad.conv2d_weight(
                    x.double().abs(), module.weight.shape, dy.double().abs(), module.stride,
                    module.padding, module.dilation)
                self.sums[key] = sums, dy.shape[0] * dy.shape[2] * dy.shape[3]
            output.register_hook(backward)
        return forward


def _assert_gradients_equal(plain: torch.nn.Module, ckpt: torch.nn.Module,
                            sums: dict[str, tuple[torch.Tensor, int]], where: object) -> None:
    """Every gradient bit for bit, except an image convolution's weight gradient.

    That one (the ResNet stem's, split into channel groups by ``module/channel_split.py``) is
    the same K = batch x output pixels products summed by a kernel that oneDNN picks for the
    group's width, so the order of the float32 additions may differ (it does on AVX-512 CPUs,
    not on AVX2). Each order is within gamma_K = K u / (1 - K u) times the sum of the terms'
    absolute values of the exact sum (Higham, Accuracy and Stability, 3.1; u = 2^-24, products
    included), so the two are within twice that: the bound is derived, not tuned. The inputs
    of that sum (the image and the convolution's output gradient) are bit for bit equal, or
    the bound would not hold.
    """
    for (key, a), b in zip(plain.named_parameters(), ckpt.parameters(), strict=True):
        if a.grad is None or b.grad is None:  # frozen by design (birefnet's gradient preds)
            assert a.grad is None and b.grad is None and not a.requires_grad, (where, key)
            continue
        if torch.equal(a.grad, b.grad):
            continue
        assert key in sums, (where, key, "differs and is not an image convolution's weight")
        abs_sum, k = sums[key]
        u = 2.0 ** -24
        bound = 2 * (k * u / (1 - k * u)) * abs_sum
        excess = (a.grad.double() - b.grad.double()).abs() - bound
        assert excess.max().item() <= 0, (where, key, excess.max().item())


@pytest.mark.slow  # 18 cases, each 8 networks built and stepped
@pytest.mark.parametrize("backbone", BACKBONES)
@pytest.mark.parametrize("name", NETWORKS.names())
def test_gradients_equal_plain_in_eval_and_train_mode(name: str, backbone: str) -> None:
    for train in (False, True):
        plain = _model(name, backbone, "off").train(train)
        sums = ImageConvSums(plain).sums
        loss_plain = _steps(plain, size=SIZE.get((name, backbone), 32))
        for mode in MODES:
            ckpt = _model(name, backbone, mode).train(train)
            assert torch.equal(loss_plain, _steps(ckpt, size=SIZE.get((name, backbone), 32)))
            _assert_gradients_equal(plain, ckpt, sums, (train, mode))


@pytest.mark.parametrize("name", NETWORKS.names())
def test_batchnorm_statistics_update_once_per_step(name: str) -> None:
    plain = _model(name, "test_resnet", "off").train()
    ckpt = _model(name, "test_resnet", "all").train()
    _steps(plain, steps=2)
    _steps(ckpt, steps=2)
    tracked = {n: int(b) for n, b in ckpt.named_buffers() if n.endswith("num_batches_tracked")}
    assert tracked == {n: int(b) for n, b in plain.named_buffers()
                       if n.endswith("num_batches_tracked")}
    # once per forward; birefnet runs its backbone twice (the image and its half-size copy)
    assert set(tracked.values()) == ({2, 4} if name == "birefnet" else {2})
    for (key, a), (_, b) in zip(plain.named_buffers(), ckpt.named_buffers(), strict=True):
        assert torch.equal(a, b), key  # running mean / var: exactly the plain run's


@pytest.mark.parametrize("name", NETWORKS.names())
def test_checkpointing_saves_memory_where_asked(name: str) -> None:
    saved = {}
    for mode in ["off", *MODES]:
        model = _model(name, "resnet18", mode).train()
        with SavedTensors(model) as counter:
            model(torch.randn(2, 3, 32, 32))["logits"].sum()
        saved[mode] = counter.nbytes
    assert saved["backbone"] < saved["off"] and saved["decoder"] < saved["off"]
    assert saved["all"] < min(saved["backbone"], saved["decoder"])
    assert saved["all"] < 0.4 * saved["off"]


def test_state_dict_keys_do_not_change_and_switching_off_restores() -> None:
    plain = _model("fpn", "resnet18", "off")
    ckpt = _model("fpn", "resnet18", "all")
    assert list(plain.state_dict()) == list(ckpt.state_dict())
    blocks = find_blocks(ckpt.backbone.body)
    assert len(blocks) == 8 and all(is_checkpointed(b) for b in blocks)  # resnet18: 4 x 2 blocks
    ckpt.backbone.set_checkpointing(False)
    assert not any(is_checkpointed(m) for m in ckpt.modules())
    assert ckpt.backbone._plan is None


def test_no_autograd_means_no_checkpointing() -> None:
    model = _model("fpn", "resnet18", "all").eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, 32, 32))["logits"]
    assert out.shape == (1, 1, 32, 32)


def test_unknown_mode_is_a_config_error() -> None:
    from sodkit.network.base import set_checkpointing

    with pytest.raises(ConfigError, match="model.checkpointing"):
        set_checkpointing(_model("fpn", "resnet18", "off"), "blocks")


def test_training_with_checkpointing_and_bf16_end_to_end(tmp_path) -> None:
    # The whole `sodkit train` path: BatchNorm counted once per optimizer step in the checkpoint.
    from pathlib import Path

    from sodkit.cli import main
    from tests.sod_fixtures import write_duts_layout

    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=2)
    config = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
    code = main(["train", str(config), f"data_root={data}", f"output_root={tmp_path}", "name=ck",
                 "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
                 "data.size=32", "data.batch_size=2", "data.test_batch_size=2",
                 "model.decoder_channels=8", "model.checkpointing=all", "runtime.precision=bf16",
                 "train.epochs=1", "train.image_every=0"])
    assert code == 0
    state = torch.load(tmp_path / "ck" / "checkpoints" / "last.pt", weights_only=False)
    assert state["step"] == 4
    tracked = {k: int(v) for k, v in state["model"].items() if k.endswith("num_batches_tracked")}
    assert tracked and set(tracked.values()) == {4}
    assert (tmp_path / "ck" / "results.json").is_file()


def _train_step(mode: str, overrides: list[str]):
    from pathlib import Path

    from sodkit.config import load_config
    from sodkit.engine.bench import build_train_step, random_batch

    config = Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
    cfg = load_config(config, [*overrides, f"model.checkpointing={mode}"])
    torch.manual_seed(0)
    step, runtime = build_train_step(cfg)
    return step, random_batch(cfg, runtime.device)


def test_checkpointed_step_peak_is_at_most_55_percent_of_plain() -> None:
    # The demo's network cut after layer1 (FPN on the stem and the first stage), so that its
    # activations, not its 0.6 MB of gradients, decide the peak, as on the demo at full size.
    # The whole TrainStep (optimizer step included) is measured from torch's allocation events.
    from sodkit.engine.memory import AllocatedPeak

    overrides = ["model.out_indices=[1]", "data.batch_size=4", "data.size=64",
                 "model.decoder_channels=8"]
    peaks, losses = {}, {}
    for mode in ("off", "all"):
        step, batch = _train_step(mode, overrides)
        step([batch])  # warm-up: the optimizer state exists before the measured step
        with AllocatedPeak() as peak:
            losses[mode] = step([batch]).terms["loss"]
        peaks[mode] = peak.added_bytes
    assert abs(losses["all"] - losses["off"]).item() <= 1e-6
    assert peaks["all"] <= 0.55 * peaks["off"], peaks


def _stem(momentum: float | None) -> torch.nn.ModuleList:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 10, 7, stride=2, padding=3, bias=False)
    bn = torch.nn.BatchNorm2d(10, momentum=momentum)
    torch.nn.init.normal_(bn.weight)
    return torch.nn.ModuleList([conv, bn, torch.nn.ReLU(inplace=True),
                                torch.nn.MaxPool2d(3, stride=2, padding=1)])


@pytest.mark.parametrize("momentum", [0.1, None])
def test_channel_split_stem_equals_the_plain_stem_bit_for_bit(momentum: float | None) -> None:
    from sodkit.module.channel_split import run_split

    image = torch.randn(3, 3, 40, 40, generator=torch.Generator().manual_seed(2))
    plain, split = _stem(momentum).train(), _stem(momentum).train()
    for _ in range(2):  # the second step reads the running statistics the first one left
        expected = plain[3](plain[2](plain[1](plain[0](image))))
        out = run_split(split, image, width=4)  # 10 channels: groups of 4, 4, 2
        assert out is not None and torch.equal(out, expected)
        (expected * expected).sum().backward()
        (out * out).sum().backward()
    conv_plain, *rest_plain = plain.parameters()
    conv_split, *rest_split = split.parameters()
    # groups narrower than the kernel's channel block: the weight gradient's rounding differs
    scale = conv_plain.grad.abs().max()
    assert (conv_plain.grad - conv_split.grad).abs().max() <= 2e-6 * scale
    for a, b in zip(rest_plain, rest_split, strict=True):
        assert torch.equal(a.grad, b.grad)  # BatchNorm's weight and bias
    for a, b in zip(plain.buffers(), split.buffers(), strict=True):
        assert torch.equal(a, b)  # running mean / var, num_batches_tracked == 2
    plain.eval(), split.eval()
    expected = plain[3](plain[2](plain[1](plain[0](image))))
    assert torch.equal(run_split(split, image, width=4), expected)


def test_channel_split_declines_what_it_cannot_reproduce() -> None:
    from sodkit.module.channel_split import run_split
    from sodkit.module.sync_bn import AllReduceBatchNorm

    image = torch.randn(2, 3, 16, 16)
    # an input gradient would be summed group by group: another order than plain
    assert run_split(_stem(0.1), image.requires_grad_(), width=4) is None
    image = image.detach()
    with torch.no_grad():
        assert run_split(_stem(0.1), image, width=4) is None  # nothing to checkpoint
    synced = _stem(0.1)
    synced[1] = AllReduceBatchNorm(10)  # statistics over ranks: not per group
    assert run_split(synced, image, width=4) is None
    assert run_split(torch.nn.ModuleList([torch.nn.MaxPool2d(2)]), image, width=4) is None
    assert run_split(_stem(0.1), image) is None  # 10 channels: one group of 16 would be all


def test_group_width_rounds_to_channel_blocks() -> None:
    from sodkit.module.channel_split import group_width

    assert group_width(64) == 16 and group_width(32) == 16 and group_width(24) == 16
    assert group_width(128) == 32 and group_width(10) == 10
