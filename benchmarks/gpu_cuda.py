"""In-process CUDA checks for ``benchmarks/gpu.sh`` (``gpu_checks.py cuda``): what the CPU tests
cannot reach. Each returns one markdown row or raises ``CheckFailed``."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
from gpu_checks import CheckFailed, row

from sodkit.config import LossCfg, ModelCfg, OptimCfg, RuntimeCfg
from sodkit.engine.memory import PeakMemory
from sodkit.engine.rng import rng_state, set_rng_state
from sodkit.engine.runtime import Runtime
from sodkit.engine.step import TrainStep
from sodkit.loss import build_criterion
from sodkit.network import build_network
from sodkit.optim import build_optimizer


def _step(**runtime: object) -> TrainStep:
    rt = Runtime(RuntimeCfg(device="cuda", seed=0, **runtime))  # type: ignore[arg-type]
    model = rt.wrap(build_network(ModelCfg(backbone="resnet18", decoder_channels=16)))
    optimizer = build_optimizer(rt.unwrap(model), OptimCfg(name="sgd", lr=0.01), 4)
    return TrainStep(model, build_criterion(LossCfg()).to(rt.device), optimizer, rt)


def _batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"image": torch.randn(4, 3, 96, 96, generator=g).pin_memory(),
            "mask": (torch.rand(4, 1, 96, 96, generator=g) > 0.5).float().pin_memory()}


def device_and_rng() -> str:
    rt = Runtime(RuntimeCfg(device="cuda", seed=0))
    if rt.device.type != "cuda" or torch.cuda.current_device() != rt.device.index:
        raise CheckFailed(row("device", "FAIL", f"{rt.device}, current "
                                                f"{torch.cuda.current_device()}"))
    state = rng_state(rt.device)
    first = torch.rand(8, device=rt.device)
    set_rng_state(state, rt.device)
    again = torch.rand(8, device=rt.device)
    if "cuda" not in state or not torch.equal(first, again):
        raise CheckFailed(row("CUDA RNG state round trip", "FAIL"))
    return row("device from local rank, CUDA RNG state round trip", "ok", str(rt.device))


def peak_memory() -> str:
    device = torch.device("cuda", torch.cuda.current_device())
    with PeakMemory(device) as peak:
        block = torch.empty(64 * 2**20, dtype=torch.uint8, device=device)
        del block
    if not 64 * 2**20 <= peak.added_bytes < 80 * 2**20:
        raise CheckFailed(row("peak memory per device", "FAIL", f"{peak.added_bytes} bytes"))
    return row("peak memory per device (64 MiB block)", "ok", f"{peak.added_bytes / 2**20:.1f} MiB")


def syncs_per_step(step: TrainStep, steps: int = 5) -> float:
    """Host-device syncs of a step, counted by CUDA's own sync debug mode (one warning each)."""
    step([_batch()])  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(steps):
                step([_batch(i)])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in seen) / steps


def fp16_scaler() -> str:
    step = _step(precision="fp16")
    normal = step([_batch()])
    if normal.terms["skipped"].item() != 0.0 or not torch.isfinite(normal.terms["loss"]):
        raise CheckFailed(row("fp16 + GradScaler", "FAIL", "first step skipped or not finite"))
    before = [p.detach().clone() for p in step.model.parameters()]
    step.runtime.scaler.update(2.0**60)  # overflows the fp16 gradients for sure
    out = step([_batch(1)])
    same = all(torch.equal(a, b) for a, b in zip(before, step.model.parameters(), strict=True))
    if out.terms["skipped"].item() != 1.0 or "nonfinite" in out.terms or not same:
        raise CheckFailed(row("fp16 + GradScaler overflow skip", "FAIL", str(out.terms)))
    syncs = syncs_per_step(step)
    if syncs > 2:
        raise CheckFailed(row("fp16 syncs per step", "FAIL", f"{syncs:g} > 2"))
    return row("fp16 + GradScaler: overflow skipped, not a bad step; syncs/step", "ok",
               f"scale {step.runtime.scaler.get_scale():g}, {syncs:g} syncs/step")


def fp32_syncs() -> str:
    syncs = syncs_per_step(_step())
    if syncs > 1:
        raise CheckFailed(row("fp32 syncs per step", "FAIL", f"{syncs:g} > 1 (the guard)"))
    return row("fp32 host-device syncs per step (the NaN guard only)", "ok", f"{syncs:g}")


def channels_last_and_compile() -> list[str]:
    plain, nhwc = _step(), _step(channels_last=True)
    a, b = plain([_batch()]).terms["loss"].item(), nhwc([_batch()]).terms["loss"].item()
    if abs(a - b) > 1e-3 * max(1.0, abs(a)):
        raise CheckFailed(row("channels_last", "FAIL", f"loss {b} vs {a}"))
    rows = [row("channels_last: same loss as NCHW", "ok", f"{b:.6f} vs {a:.6f}")]
    compiled = _step(compile=True)
    losses = [compiled([_batch(i)]).terms["loss"].item() for i in range(3)]
    first = _step()([_batch(0)]).terms["loss"].item()
    if not all(map(torch.isfinite, map(torch.tensor, losses))) or abs(losses[0] - first) > 1e-2:
        raise CheckFailed(row("torch.compile", "FAIL", f"losses {losses} vs eager {first}"))
    rows.append(row("torch.compile: 3 steps, first loss as eager", "ok",
                    f"{losses[0]:.5f} vs {first:.5f}"))
    return rows


def run_all() -> list[str]:
    checks: list[Callable[[], str | list[str]]] = [
        device_and_rng, peak_memory, fp32_syncs, fp16_scaler, channels_last_and_compile]
    rows: list[str] = []
    for check in checks:
        out = check()
        rows += [out] if isinstance(out, str) else out
    return rows
