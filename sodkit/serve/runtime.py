"""What ``GET /info`` says about where the model runs and the limits a request meets."""

from __future__ import annotations

from typing import Any

from ..limits import MIB, max_file_bytes, max_pixels
from ..version import __version__


def runtime_info(device: Any, runner: str = "PyTorch fp32") -> dict[str, Any]:
    """``runner``: what runs the forward and at which precision (``onnxruntime fp32``)."""
    import torch

    info: dict[str, Any] = {"device": str(device), "threads": torch.get_num_threads(),
                            "runner": runner, "precision": runner.rsplit(" ", 1)[-1],
                            "sodkit": __version__, "torch": torch.__version__,
                            "max_file_mb": max_file_bytes() // MIB, "max_pixels": max_pixels()}
    if getattr(device, "type", None) == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info
