"""Optional speed-ups the runtime applies to the model: channels-last memory and torch.compile.

Both are runtime choices (``runtime.channels_last``, ``runtime.compile``), not properties of a
network. ``torch.compile`` is refused, with the reason, where it cannot work:

- with gradient checkpointing: sodkit's checkpoint segments hand ``torch.utils.checkpoint`` a
  context that keeps BatchNorm statistics out of the recomputation, and under ``torch.compile``
  checkpoint accepts only ``TorchDispatchMode`` contexts;
- on the CPU without a C++ compiler: inductor compiles C++ kernels.
"""

from __future__ import annotations

import os
import shutil

import torch
from torch import nn

from ..errors import ConfigError


def uses_checkpointing(model: nn.Module) -> bool:
    backbone = getattr(model, "backbone", None)
    return bool(getattr(model, "checkpoint_decoder", False)
                or getattr(backbone, "checkpointing", None))


def compile_refusal(model: nn.Module, device: torch.device) -> str | None:
    """Why ``runtime.compile`` cannot be used here, or None when it can."""
    if uses_checkpointing(model):
        return ("torch.compile does not accept the BatchNorm-preserving checkpoint contexts of "
                "model.checkpointing; set model.checkpointing=off or runtime.compile=false")
    if device.type == "cpu":
        compilers = [os.environ.get("CXX", ""), "g++", "clang++"]
        if not any(c and shutil.which(c) for c in compilers):
            return ("torch.compile on the CPU needs a C++ compiler (g++ or clang++, or $CXX) "
                    "and none was found; install one or set runtime.compile=false")
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    return None


def compile_model(model: nn.Module, device: torch.device) -> nn.Module:
    """``torch.compile(model)``, or a ConfigError that says why it cannot be."""
    reason = compile_refusal(model, device)
    if reason is not None:
        raise ConfigError(f"runtime.compile: {reason}")
    return torch.compile(model)


def to_channels_last(tensor: torch.Tensor) -> torch.Tensor:
    """Images (4-d) in channels-last memory order; other tensors unchanged."""
    return tensor.contiguous(memory_format=torch.channels_last) if tensor.ndim == 4 else tensor
