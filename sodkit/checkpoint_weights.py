"""Which weights a training checkpoint or a model file holds (the EMA average or the trained
model, as ``--weights`` asks) and whether they are usable: a NaN or an infinity (a run that
diverged) is refused once, when they are read. Plain dict and tensor operations, below every
reader of trained weights (model files, the loader of trained models)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import UserError


def pick_weights(state: dict[str, Any], which: str, source: Path) -> tuple[str, dict[str, Any]]:
    """``(name, state dict)`` of the weights ``--weights`` asks for."""
    if state.get("model_file"):  # one set of weights, the one its provenance names
        held = str(state.get("provenance", {}).get("weights", "model"))
        if which not in ("auto", held):
            raise UserError(f"{source} is a model file holding the {held} weights only; drop "
                            f"--weights {which}, or export the {which} weights from the "
                            f"training checkpoint")
        return held, state["model"]
    ema = state.get("ema")
    if which == "ema" and not ema:
        raise UserError(f"{source} has no EMA weights (trained without train.ema_decay); "
                        f"use --weights model")
    if which != "model" and ema:
        return "ema", ema["model"]
    return "model", state["model"]


def check_finite_weights(weights: dict[str, Any], name: str, source: Path) -> None:
    """Weights with a NaN or an infinity (a run that diverged) would predict NaN everywhere,
    which quantises to all-black masks: refused once, when they are loaded."""
    bad = [key for key, value in weights.items()
           if hasattr(value, "is_floating_point") and value.is_floating_point()
           and not _all_finite(value)]
    if bad:
        other = "; or --weights model" if name == "ema" else ""
        raise UserError(f"{source}: the {name} weights hold NaN or infinite values ({len(bad)} "
                        f"tensors, e.g. {bad[0]}): the run had diverged when it was saved; use "
                        f"an earlier checkpoint{other}")


def _all_finite(value: Any) -> bool:
    """Exactly ``value.isfinite().all()``, about 20x faster for a finite tensor (ResNet-18's
    weights: 5 ms against 90 ms, a fixed cost of every ``sodkit predict``): one NaN or
    infinity makes the sum non-finite, so a finite sum proves them all finite; a sum that is
    not (an overflow of large finite values) is checked element by element. The sum is
    numpy's where it can be, in this thread: torch's runs its OpenMP team, which on a busy
    machine took 4-8x longer (MINet-R50's weights: 1.2 s against 0.15-0.3)."""
    try:
        array = value.detach().numpy()
    except (TypeError, RuntimeError):  # bfloat16, a device: torch's sum
        return bool(value.sum().isfinite()) or bool(value.isfinite().all())
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):  # the overflow is the answer's
        return bool(np.isfinite(array.sum())) or bool(np.isfinite(array).all())


def assign_weights(model: Any, weights: dict[str, Any], mapped: bool = False) -> None:
    """Load ``weights`` strictly into ``model`` (built for them: ``initialise=False``) by
    assigning tensors to its parameters and buffers rather than copying into them.

    Each tensor is copied once, in this thread, by numpy: ``load_state_dict``'s copies run
    torch's OpenMP team, whose threads, on a machine whose cores are busy, took 2.6x longer
    (MINet-R50, 650 MB, on this 2-core machine at load 6: 1.37 s against 0.53 s on one
    thread; the command's start: benchmarks/startup.py). ``mapped``: the file's tensors
    themselves are assigned, no copy (a mapped file's pages then serve the forward straight
    from the page cache): for a command that ends when its work is done (``sodkit predict``),
    not for a long-lived model, whose weights a file rewritten in place would change under it.
    A tensor of another dtype than its parameter's is cast (as ``load_state_dict`` does); a
    network with tied weights is loaded by ``load_state_dict``'s copies (assigning would untie
    them)."""
    expected = model.state_dict(keep_vars=True)
    tied = (len(list(model.named_parameters(remove_duplicate=False)))
            != len(list(model.named_parameters()))
            or len(list(model.named_buffers(remove_duplicate=False)))
            != len(list(model.named_buffers())))
    if tied:
        model.load_state_dict(weights)
        return
    model.load_state_dict({key: _assignable(value, expected.get(key), mapped)
                           for key, value in weights.items()}, assign=True)


def _assignable(value: Any, target: Any, mapped: bool) -> Any:
    """``value`` as the tensor to put in ``target``'s place: cast to its dtype, copied unless
    ``mapped``; as it is where it does not fit (``load_state_dict`` names the mismatch)."""
    import numpy as np
    import torch

    if not isinstance(value, torch.Tensor) or not isinstance(target, torch.Tensor) \
            or value.shape != target.shape:
        return value
    if value.dtype != target.dtype:
        return value.to(target.dtype)  # a copy
    if mapped:
        return value
    try:
        source = value.detach().numpy()
    except (TypeError, RuntimeError):  # bfloat16, a device: torch's copy
        return value.detach().clone()
    out = torch.empty(value.shape, dtype=value.dtype)
    np.copyto(out.numpy(), source)
    return out
