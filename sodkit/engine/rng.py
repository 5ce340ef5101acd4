"""Each process's RNG states as tensors and plain Python values, so checkpoints load with
``torch.load(weights_only=True)``.

CUDA: only the process's own device's generator is saved and restored
(``torch.cuda.get_rng_state(device)``), never every visible GPU's: a job resumed on fewer GPUs
per node would fail to restore states for devices it does not see, and another rank's GPU is not
this rank's business.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..torchfile import numpy_state, plain_numpy_state


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """This process's RNG states as tensors and plain Python values (``weights_only`` loads it).

    CUDA: only ``device``'s generator, never every visible GPU's (a resumed job may see fewer).
    """
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": plain_numpy_state(np.random.get_state()),
        "torch": torch.get_rng_state(),
    }
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: Mapping[str, Any], device: torch.device | None = None) -> None:
    """Restore what :func:`rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np.random.set_state(numpy_state(state["numpy"]))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if isinstance(cuda, torch.Tensor) and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(cuda, device)
