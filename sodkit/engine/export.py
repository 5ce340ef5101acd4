"""ONNX export of a trained network with its sigmoid, checked against PyTorch with onnxruntime.

The exported graph maps a normalised image batch ``image`` (B, 3, H, W) to ``saliency``
(B, 1, H, W) probabilities. Side outputs are switched off first, so the graph holds only what
the main output needs. The parity check runs the same random inputs through both and reports
the largest absolute difference per input size; with ``dynamic`` (batch, height and width
symbolic) two more sizes, neither a multiple of 32, are checked as well.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from ..errors import UserError
from ..module.deform_export import (
    DEFORM_CONV_MIN_OPSET,
    Form,
    deform_export_form,
    has_deformable,
    min_opset,
)

logger = logging.getLogger(__name__)

TOLERANCE = 1e-4  # the largest accepted |onnxruntime - PyTorch| on a probability
DEFAULT_OPSET = 17
MAX_LOGGED = 64 * 1024  # of what the exporter prints, the part kept for the debug log


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


def export_onnx(model: nn.Module, path: Path, size: tuple[int, int], opset: int,
                dynamic: bool, deform: Form | None = None, names: tuple[str, str] = (
                    "image", "saliency")) -> None:
    """Write the ONNX file ``path`` (``sodkit export`` gives a temporary path of its output
    folder, which puts it in place whole, with the user's umask, and records it).

    Deformable convolutions are written in ``deform``'s form (default: :func:`deform_form`);
    what the exporter prints (the whole TorchScript graph when it refuses an operator) is kept
    off the terminal and logged at debug level. ``names``: the graph's input and output
    (``sodkit predict --runtime onnx``'s graph outputs the pipeline's scores, not
    probabilities: :mod:`sodkit.runners.onnx_cache`)."""
    model.eval()
    fix = getattr(getattr(model.network, "backbone", None), "fix_input_size", None)
    if fix is not None:  # a plain ViT: its position embedding resampled once, for this size
        fix(size, dynamic)
    form = deform or deform_form(opset)
    if has_deformable(model) and opset < min_opset(form):
        what = "ONNX's DeformConv" if form == "DeformConv" else "GridSample"
        raise UserError(f"export: the network's deformable convolutions need --opset "
                        f"{min_opset(form)} or newer ({what}); asked: {opset}")
    dummy = torch.randn(1, 3, *size)
    axes = {0: "batch", 2: "height", 3: "width"}
    image, output = names
    with warnings.catch_warnings(), torch.no_grad(), deform_export_form(model, form), \
            quiet_output("torch.onnx.export"):
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        try:
            torch.onnx.export(
                model, (dummy,), str(path), dynamo=False, opset_version=opset,
                input_names=[image], output_names=[output],
                dynamic_axes={image: axes, output: axes} if dynamic else None)
        except torch.onnx.errors.UnsupportedOperatorError as exc:
            raise UserError(unsupported_message(str(exc), opset)) from exc
        finally:
            # torch's setup_onnx_logging tests the function _jit_is_onnx_log_enabled (always
            # true) instead of calling it: every export leaves torch's ONNX log switched on
            with contextlib.suppress(AttributeError):
                torch._C._jit_set_onnx_log_enabled(False)


def default_opset(model: nn.Module) -> int:
    """17; 19 for a network with deformable convolutions where the installed onnxruntime runs
    ONNX's ``DeformConv`` node, which is faster there than their decomposition (BiRefNet's
    deformable ASPP 1.2-1.8x, the whole network 1.15x at one thread: benchmarks/RESULTS.md)."""
    if has_deformable(model) and deform_conv_runs():
        return DEFORM_CONV_MIN_OPSET
    return DEFAULT_OPSET


@functools.cache
def deform_conv_runs() -> bool:
    """Whether the installed onnxruntime runs a ``DeformConv`` node on the CPU (its releases
    before 2026 have no kernel for it)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    names = ["x", "w", "offset", "b", "mask"]
    node = helper.make_node("DeformConv", names, ["y"], kernel_shape=[1, 1])
    graph = helper.make_graph(
        [node], "probe", [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                          for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    options = ort.SessionOptions()
    options.log_severity_level = 4
    ones = {n: np.ones(s, np.float32) for n, s in zip(
        names, [(1, 1, 2, 2), (1, 1, 1, 1), (1, 2, 2, 2), (1,), (1, 1, 2, 2)], strict=True)}
    try:
        session = ort.InferenceSession(probe.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return session.run(None, ones)[0].shape == (1, 1, 2, 2)
    except Exception:  # NOT_IMPLEMENTED, or a schema it does not know
        return False


def deform_form(opset: int) -> Form:
    """The form of deformable convolution an export at ``opset`` writes: ONNX's
    ``DeformConv`` node from opset 19, else the decomposition (benchmarks/deform_onnx.py)."""
    return "DeformConv" if opset >= DEFORM_CONV_MIN_OPSET else "decomposed"


@contextmanager
def quiet_output(what: str) -> Iterator[None]:
    """File descriptors 1 and 2 go to a temporary file for the block, its text to the debug
    log: the TorchScript exporter prints through C++ streams, which no Python redirection
    reaches (it prints the whole graph, thousands of lines, before raising on an operator).
    Process-wide for the block: what other threads print meanwhile goes to the log too."""
    _flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:  # no standard streams (a daemon): nothing reaches a terminal anyway
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            _flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            text = sink.read(MAX_LOGGED).decode(errors="replace")
            if text:
                logger.debug("%s printed (first %d bytes):\n%s", what, MAX_LOGGED, text)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def unsupported_message(error: str, opset: int) -> str:
    """One line naming the operator the exporter refused."""
    match = re.search(r"operator\s+(?:with unrecognized namespace\s+)?'?([\w:.]+)'?", error)
    operator = match.group(1).rstrip(".") if match else "an operator"
    return f"export: the network uses {operator}, which ONNX export (opset {opset}) cannot write"


def check_parity(model: SaliencyModel, path: Path, sizes: list[tuple[int, int]],
                 seed: int = 0, done: Callable[[str], None] | None = None
                 ) -> list[tuple[tuple[int, int], float]]:
    """``[(size, max |onnxruntime - PyTorch|)]`` on seeded random inputs (batch 2 when the
    graph is dynamic, else the export's batch of 1); ``done(what)`` after each step. A graph
    onnxruntime cannot load or run is one line naming the size and onnxruntime's reason (its
    own log kept off the terminal)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # fatal only: its errors come back as exceptions
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise UserError(_runtime_failure(path, "load", exc)) from exc
    done = done or (lambda what: None)
    done("onnxruntime session")
    fixed_batch = isinstance(session.get_inputs()[0].shape[0], int)
    generator = torch.Generator().manual_seed(seed)
    results = []
    for size in sizes:
        image = torch.randn(1 if fixed_batch else 2, 3, *size, generator=generator)
        with torch.no_grad():
            expected = model.eval()(image).numpy()
        try:
            got = session.run(["saliency"], {"image": image.numpy()})[0]
        except Exception as exc:
            raise UserError(_runtime_failure(path, f"run at {size[0]}x{size[1]}", exc)) from exc
        if got.shape != expected.shape:
            raise ValueError(f"onnxruntime returned {got.shape} for {tuple(image.shape)}, "
                             f"PyTorch {expected.shape}")
        results.append((size, float(np.abs(got - expected).max())))
        done(f"{size[0]}x{size[1]} checked")
    return results


def _runtime_failure(path: Path, what: str, exc: Exception) -> str:
    import onnxruntime as ort

    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    hint = ("; ONNX's DeformConv node (--opset 19 and newer) needs an onnxruntime with its CPU "
            "kernel: --opset 18 or lower writes deformable convolutions in plain operators"
            if "DeformConv" in reason else "")
    return (f"{path}: onnxruntime {ort.__version__} cannot {what} the exported graph: "
            f"{reason}{hint}")
