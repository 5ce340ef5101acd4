"""ONNX export of a trained network with its sigmoid, checked against PyTorch with onnxruntime.

The exported graph maps a normalised image batch ``image`` (B, 3, H, W) to ``saliency``
(B, 1, H, W) probabilities. Side outputs are switched off first, so the graph holds only what
the main output needs. The parity check runs the same random inputs through both and reports
the largest absolute difference per input size; with ``dynamic`` (batch, height and width
symbolic) two more sizes, neither a multiple of 32, are checked as well.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..errors import UserError

logger = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest accepted |onnxruntime - PyTorch| on a probability


class SaliencyModel(nn.Module):
    """``image -> sigmoid(network(image)["logits"])``: what a deployed model returns."""

    def __init__(self, network: nn.Module) -> None:
        super().__init__()
        self.network = network

    def forward(self, image: Tensor) -> Tensor:
        return torch.sigmoid(self.network(image)["logits"])


def parity_sizes(size: tuple[int, int], dynamic: bool) -> list[tuple[int, int]]:
    """The export size, plus two other (odd-strided) sizes when the graph is dynamic."""
    h, w = size
    if not dynamic:
        return [size]
    return [size, (h + 40, w + 24), (max(32, h // 2 + 8), w + 72)]


def export_onnx(model: SaliencyModel, path: Path, size: tuple[int, int], opset: int,
                dynamic: bool) -> None:
    """Write the ONNX file ``path`` (``sodkit export`` gives a temporary path of its output
    folder, which puts it in place whole, with the user's umask, and records it)."""
    model.eval()
    fix = getattr(getattr(model.network, "backbone", None), "fix_input_size", None)
    if fix is not None:  # a plain ViT: its position embedding resampled once, for this size
        fix(size, dynamic)
    dummy = torch.randn(1, 3, *size)
    axes = {0: "batch", 2: "height", 3: "width"}
    with warnings.catch_warnings(), torch.no_grad(), _no_stdout():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        try:
            torch.onnx.export(
                model, (dummy,), str(path), dynamo=False, opset_version=opset,
                input_names=["image"], output_names=["saliency"],
                dynamic_axes={"image": axes, "saliency": axes} if dynamic else None)
        except torch.onnx.errors.UnsupportedOperatorError as exc:
            raise UserError(unsupported_message(str(exc), opset)) from exc


@contextlib.contextmanager
def _no_stdout() -> Iterator[None]:
    """The exporter's own output goes nowhere: its ``setup_onnx_logging`` switches torch's ONNX
    log on for every export (it tests the function ``_jit_is_onnx_log_enabled``, always true,
    instead of calling it), and a network it cannot export then printed its whole TorchScript
    graph on stdout (9,490 lines for BiRefNet) before the one line that says why. The C++ log
    writes to file descriptor 1, so that is what is pointed elsewhere; the log is switched off
    again after."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        with contextlib.suppress(AttributeError):
            torch._C._jit_set_onnx_log_enabled(False)


# operators ONNX export cannot write, and the setting that avoids them
EXPORT_FRIENDLY = {"deform_conv2d": "birefnet: model.birefnet.dec_att ASPP or \"\" (a "
                                    "different network: train it so)"}


def unsupported_message(error: str, opset: int) -> str:
    """One line naming the operator the exporter refused and, where known, the setting that
    avoids it."""
    match = re.search(r"operator\s+(?:with unrecognized namespace\s+)?'?([\w:.]+)'?", error)
    operator = match.group(1).rstrip(".") if match else "an operator"
    hint = next((v for k, v in EXPORT_FRIENDLY.items() if k in operator), None)
    return (f"export: the network uses {operator}, which ONNX export (opset {opset}) cannot "
            f"write" + (f"; export-friendly setting: {hint}" if hint else ""))


def check_parity(model: SaliencyModel, path: Path, sizes: list[tuple[int, int]],
                 seed: int = 0, done: Callable[[str], None] | None = None
                 ) -> list[tuple[tuple[int, int], float]]:
    """``[(size, max |onnxruntime - PyTorch|)]`` on seeded random inputs (batch 2 when the
    graph is dynamic, else the export's batch of 1); ``done(what)`` after each step."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    done = done or (lambda what: None)
    done("onnxruntime session")
    fixed_batch = isinstance(session.get_inputs()[0].shape[0], int)
    generator = torch.Generator().manual_seed(seed)
    results = []
    for size in sizes:
        image = torch.randn(1 if fixed_batch else 2, 3, *size, generator=generator)
        with torch.no_grad():
            expected = model.eval()(image).numpy()
        got = session.run(["saliency"], {"image": image.numpy()})[0]
        if got.shape != expected.shape:
            raise ValueError(f"onnxruntime returned {got.shape} for {tuple(image.shape)}, "
                             f"PyTorch {expected.shape}")
        results.append((size, float(np.abs(got - expected).max())))
        done(f"{size[0]}x{size[1]} checked")
    return results
