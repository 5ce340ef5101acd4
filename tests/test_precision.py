"""Mixed precision: bf16 steps on the CPU, fp32 losses and evaluation, GradScaler state, skips."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import ConfigError, LossCfg, ModelCfg, OptimCfg, RuntimeCfg, load_config
from sodkit.engine.runtime import Runtime
from sodkit.engine.step import TrainStep
from sodkit.inference.forward import predict_probabilities
from sodkit.loss import build_criterion
from sodkit.network import build_network
from sodkit.optim import build_optimizer
from tests.sod_fixtures import tiny_overrides, write_duts_layout

ROOT = Path(__file__).resolve().parents[1]


def _step(precision: str, accumulate: int = 1) -> TrainStep:
    runtime = Runtime(RuntimeCfg(device="cpu", precision=precision, seed=0))
    model = runtime.wrap(build_network(ModelCfg(backbone="resnet18", decoder_channels=8)))
    optimizer = build_optimizer(model, OptimCfg(lr=1e-3), 2)
    return TrainStep(model, build_criterion(LossCfg()), optimizer, runtime, accumulate)


def _batches(count: int = 1) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [{"image": torch.randn(2, 3, 32, 32, generator=g),
             "mask": (torch.rand(2, 1, 32, 32, generator=g) > 0.5).float()}
            for _ in range(count)]


def test_bf16_step_on_cpu_is_finite_and_close_to_fp32() -> None:
    batches = _batches(2)
    results = {}
    for precision in ("fp32", "bf16"):
        step = _step(precision)
        results[precision] = [step([b]).terms for b in batches]
    for fp32, bf16 in zip(results["fp32"], results["bf16"], strict=True):
        assert set(fp32) == set(bf16) == {"loss", "bce", "iou", "aux"}
        for key, value in bf16.items():
            assert value.dtype == torch.float32 and torch.isfinite(value), key
            assert torch.allclose(value, fp32[key], rtol=3e-2, atol=1e-2), key


def test_losses_are_computed_in_fp32_under_autocast() -> None:
    step = _step("bf16")
    seen = []
    criterion = step.criterion

    def spy(outputs, mask):
        seen.append(outputs["logits"].dtype)
        return criterion(outputs, mask)

    step.criterion = spy
    step(_batches())
    assert seen == [torch.float32]


def test_accumulation_needs_its_micro_batches() -> None:
    step = _step("fp32", accumulate=2)
    assert step(_batches(2)).images == 4
    with pytest.raises(ValueError, match="needs 2 micro-batches, got 1"):
        step(_batches(1))


def test_evaluation_runs_in_fp32_unless_eval_precision_says_otherwise() -> None:
    runtime = Runtime(RuntimeCfg(device="cpu", seed=0))
    model = build_network(ModelCfg(backbone="resnet18", decoder_channels=8)).eval()
    images = _batches()[0]["image"]
    with torch.no_grad():
        plain = torch.sigmoid(model(images)["logits"])
        fp32 = predict_probabilities(model, images, runtime)
        bf16 = predict_probabilities(model, images, runtime, "bf16")
    assert torch.equal(fp32, plain)
    assert bf16.dtype == torch.float32 and not torch.equal(bf16, plain)
    assert (bf16 - plain).abs().max() < 0.05
    with pytest.raises(ConfigError, match="fp16 needs a CUDA device"):
        predict_probabilities(model, images, runtime, "fp16")
    assert load_config(None, ["eval.precision=bf16"]).eval.precision == "bf16"


def test_grad_scaler_skips_non_finite_steps_and_counts_them() -> None:
    # The CPU GradScaler runs the same code path as fp16 on CUDA: inf gradients -> no update,
    # scale halved, the step reported as skipped.
    step = _step("fp32")
    step.runtime.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, enabled=True)
    before = [p.detach().clone() for p in step.model.parameters()]
    bad = _batches()[0]
    bad["image"][0, 0, 0, 0] = float("inf")
    out = step([bad])
    assert out.terms["skipped"].item() == 1.0
    assert step.runtime.scaler.get_scale() == 2.0**9
    assert all(torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    assert "nonfinite" not in out.terms  # the scaler's search, not a bad step
    assert step(_batches()).terms["skipped"].item() == 0.0


def test_grad_scaler_state_round_trips_through_a_checkpoint(tmp_path: Path) -> None:
    from sodkit.engine.trainer import Trainer

    data = write_duts_layout(tmp_path / "data", n_train=4, n_test=2)
    cfg = load_config(ROOT / "configs" / "demo.yaml", [
        f"data_root={data}", "data.train=[{preset: duts-tr}]", "data.test=[{preset: duts-te}]",
        "data.size=32", "data.batch_size=2", "data.num_workers=0", "model.decoder_channels=8",
        "runtime.device=cpu"])

    def trainer(name: str) -> Trainer:
        made = Trainer(cfg, Runtime(cfg.runtime), tmp_path / name)
        made.runtime.scaler = torch.amp.GradScaler("cpu", enabled=True)
        return made

    first = trainer("a")
    first.runtime.scaler.load_state_dict({"scale": 96.0, "growth_factor": 3.0,
                                          "backoff_factor": 0.25, "growth_interval": 7,
                                          "_growth_tracker": 5})
    first.checkpoints.save_last(first.state_dict())
    second = trainer("b")
    assert second.runtime.scaler.state_dict() != first.runtime.scaler.state_dict()
    second.load_state_dict(second.checkpoints.load(first.checkpoints.last))
    assert second.runtime.scaler.state_dict() == first.runtime.scaler.state_dict()
    # fp32 on the CPU: a disabled scaler, whose (empty) state is still saved and restored.
    assert Trainer(cfg, Runtime(cfg.runtime), tmp_path / "c").state_dict()["scaler"] == {}


def test_channels_last_step_matches_the_default_layout() -> None:
    steps = {}
    for channels_last in (False, True):
        runtime = Runtime(RuntimeCfg(device="cpu", seed=0, channels_last=channels_last))
        model = runtime.wrap(build_network(ModelCfg(backbone="resnet18", decoder_channels=8)))
        if channels_last:
            conv = model.backbone.body.conv1.weight
            assert conv.is_contiguous(memory_format=torch.channels_last)
        optimizer = build_optimizer(model, OptimCfg(lr=1e-3), 2)
        step = TrainStep(model, build_criterion(LossCfg()), optimizer, runtime)
        steps[channels_last] = step(_batches()).terms["loss"]
    assert torch.allclose(steps[False], steps[True], rtol=1e-4)


def test_compile_is_refused_with_checkpointing() -> None:
    runtime = Runtime(RuntimeCfg(device="cpu", seed=0, compile=True))
    model = build_network(ModelCfg(backbone="resnet18", decoder_channels=8, checkpointing="all"))
    with pytest.raises(ConfigError, match="runtime.compile: torch.compile does not accept"):
        runtime.wrap(model)


def test_trainer_logs_the_steps_the_scaler_skipped(tmp_path: Path, caplog, recwarn) -> None:
    # A scale of 2**127 overflows float32 gradients of magnitude >= 2. The scaled loss being
    # inf does not make them inf (autograd scales each gradient by the scale, a finite
    # number), so the BCE weight of 1e4 makes sure: the classifier bias's gradient is then
    # about 1e4 * mean(sigmoid - mask). The steps are skipped (scale halved each time), which
    # the log line reports as "skipped N"; training goes on.
    from sodkit.engine.trainer import Trainer

    data = write_duts_layout(tmp_path / "data", n_train=8, n_test=1)
    cfg = load_config(ROOT / "configs" / "demo.yaml", [
        f"data_root={data}", "data.train=[{preset: duts-tr}]", "data.test=[]",
        "data.size=32", "data.batch_size=2", "model.decoder_channels=8", "runtime.device=cpu",
        "train.epochs=1", "train.log_every=4", "train.image_every=0",
        "loss.terms={bce: 10000}"])
    trainer = Trainer(cfg, Runtime(cfg.runtime), tmp_path / "run")
    trainer.runtime.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**127, enabled=True)
    with caplog.at_level("INFO"):
        trainer.fit()
    # the progress lines (not the save's): step 1, the first feedback, then steps 2-4
    lines = [r.getMessage() for r in caplog.records
             if r.getMessage().startswith(("epoch 1/1 step 1/4 ", "epoch 1/1 step 4/4 "))
             and " loss " in r.getMessage()]
    assert len(lines) == 2 and all(" skipped " in line for line in lines)
    skipped = sum(int(line.split(" skipped ")[1].split(")")[0]) for line in lines)
    assert 1 <= skipped <= 4
    assert trainer.runtime.scaler.get_scale() == 2.0 ** (127 - skipped)
    # the schedule counts skipped steps on purpose: PyTorch's "scheduler before optimizer"
    # warning, which a skipped first step raises, is not shown (sodkit.optim.step_scheduler)
    assert not [w for w in recwarn if "lr_scheduler.step()" in str(w.message)]


def _scaled_step(accumulate: int, grad_clip: float | None, scale: float | None,
                 restore: bool = False) -> TrainStep:
    """A TrainStep with SGD; ``scale``: a real CPU GradScaler with that initial scale."""
    runtime = Runtime(RuntimeCfg(device="cpu", seed=0))
    if scale is not None:
        runtime.scaler = torch.amp.GradScaler("cpu", init_scale=scale, growth_interval=1000)
    model = runtime.wrap(build_network(ModelCfg(backbone="resnet18", decoder_channels=8)))
    optimizer = build_optimizer(model, OptimCfg(name="sgd", lr=0.1, momentum=0.9), 2)
    return TrainStep(model, build_criterion(LossCfg()), optimizer, runtime, accumulate,
                     grad_clip, restore_buffers=restore)


def test_grad_scaler_with_accumulation_and_clipping_equals_the_unscaled_step() -> None:
    """Scale by a power of two, accumulate 2 micro-batches, unscale once, clip the true
    gradients: the weights equal the unscaled step bit for bit. Unscaling twice, clipping the
    scaled gradients or dividing by the scale of another micro-batch would not."""
    batches = _batches(4)
    for clip in (None, 0.05):  # 0.05 is far below the gradient norm: clipping is active
        plain = _scaled_step(2, clip, None)
        scaled = _scaled_step(2, clip, 2.0**12)
        for i in (0, 2):
            plain(batches[i : i + 2])
            out = scaled(batches[i : i + 2])
            assert out.terms["skipped"].item() == 0.0
        for a, b in zip(plain.model.state_dict().values(), scaled.model.state_dict().values(),
                        strict=True):
            assert torch.equal(a, b), clip
        assert scaled.runtime.scaler.get_scale() == 2.0**12


def test_a_scaler_skipped_step_leaves_no_batchnorm_update_behind() -> None:
    step = _scaled_step(1, None, 2.0**10, restore=True)
    before = {k: v.clone() for k, v in step.model.state_dict().items()}
    bad = _batches()[0]
    bad["image"][0, 0, 0, 0] = float("inf")
    out = step([bad])
    assert out.terms["skipped"].item() == 1.0 and "nonfinite" not in out.terms
    for key, value in step.model.state_dict().items():
        assert torch.equal(value, before[key]), key
    key = next(k for k in before if k.endswith("running_mean"))
    step(_batches())  # a good step updates them again
    assert not torch.equal(step.model.state_dict()[key], before[key])


def test_at_scale_one_or_below_a_non_finite_step_is_a_bad_step_and_not_applied() -> None:
    """A diverged loss halves the scale step after step; once the scale is <= 1 the overflow
    is not the scale's doing: the guard reports ``nonfinite`` (the trainer counts it against
    train.max_bad_steps), no update is applied, and the scale stays where it is."""
    step = _scaled_step(1, 1.0, 1.0, restore=True)
    before = {k: v.clone() for k, v in step.model.state_dict().items()}
    bad = _batches()[0]
    bad["image"][:, :, :4, :4] = float("nan")
    out = step([bad])
    assert out.terms["nonfinite"].item() == 1.0 and "skipped" not in out.terms
    for key, value in step.model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert step.runtime.scaler.get_scale() == 1.0
    assert all(p.grad is None for p in step.model.parameters())
    good = step(_batches())
    assert "nonfinite" not in good.terms and good.terms["skipped"].item() == 0.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="fp16 evaluation runs where CUDA is")
@pytest.mark.parametrize("command", ["train", "test"])
def test_fp16_evaluation_without_cuda_is_refused_before_any_work(command, data_root, tmp_path,
                                                                 capsys) -> None:
    """eval.precision is first used at the first evaluation, epochs into a run: it is checked
    with runtime.precision, before a folder is claimed or a checkpoint read."""
    config = str(ROOT / "configs" / "demo.yaml")
    args = [command, config, *tiny_overrides(data_root, tmp_path, "fp16"), "eval.precision=fp16"]
    if command == "test":  # a file that is never read: the precision is refused first
        (tmp_path / "never_read.pt").write_bytes(b"not a checkpoint")
        args += ["--checkpoint", str(tmp_path / "never_read.pt")]
    assert main(args) == 2
    assert "eval.precision: fp16 needs a CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "fp16").exists()
