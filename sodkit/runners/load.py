"""A trained model's forward, on the runtime :mod:`sodkit.runners.choice` chose: PyTorch's
network (:func:`sodkit.trained.load_trained`), or an onnxruntime session on the cached graph
(:mod:`sodkit.runners.onnx_cache`) in the network's shape
(:class:`~sodkit.inference.onnx_network.OnnxNetwork`). Either goes to the same forward
(:func:`sodkit.inference.forward.predict_scores`), so ``sodkit predict``, ``test``, the API and
the server keep one path around it.

A cached graph is read without building the PyTorch network at all (the start is then the
file's hash and the session's). ``auto`` falls back to PyTorch, with a line, where the network
does not export or the cache folder cannot be written; a runtime the user named does not: its
one-line error is the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserError, WriteFailed
from .choice import Choice

if TYPE_CHECKING:
    from torch import nn

    from ..config.schema import ModelCfg
    from ..trained import TrainedFile

logger = logging.getLogger(__name__)


@dataclass
class Loaded:
    """The forward to run: ``network`` (a PyTorch network or an :class:`OnnxNetwork`),
    ``choice`` (what runs it), ``precision`` (the autocast precision for the forward: fp32
    for onnxruntime, whose precision is in its graph) and ``weights`` (ema or model)."""

    network: nn.Module
    choice: Choice
    precision: str
    weights: str

    @property
    def is_onnx(self) -> bool:
        return self.choice.runtime == "onnx"


def load_runner(file: TrainedFile, choice: Choice, *, size: int, threads: int,
                weights: str = "auto", device: Any = None, coarse: bool = False,
                model: ModelCfg | None = None,
                transform: Callable[[Any], Any] | None = None, mapped: bool = False) -> Loaded:
    """The forward of ``file`` on ``choice``'s runtime. ``size``: the input side (the graph is
    exported at it); ``threads``: onnxruntime's intra-op threads (PyTorch's are the process's,
    set by the caller); ``coarse``: the pipeline's output side takes coarse logits;
    ``transform``: the inference transform (int8's calibration images go through it);
    ``mapped``: PyTorch's weights stay the mapped file's pages (``load_trained``)."""
    if choice.runtime == "onnx":
        try:
            return _onnx(file, choice, size, threads, weights, coarse, model, transform)
        except UserError as exc:
            from .onnx_cache import CacheUnwritable

            exported = str(exc).startswith("export:")
            if not choice.why or not (exported or isinstance(exc, (WriteFailed,
                                                                   CacheUnwritable))):
                raise
            logger.info("runtime: PyTorch (%s; auto falls back)", exc)
            choice = Choice("torch", choice.precision, "auto: the network does not export"
                            if exported else "auto: the ONNX cache cannot be written")
    from ..trained import load_trained

    trained = load_trained(file, weights=weights, device=device, size=size, model=model,
                           mapped=mapped)
    return Loaded(trained.network, choice, choice.precision, trained.weights)


def _onnx(file: TrainedFile, choice: Choice, size: int, threads: int, weights: str,
          coarse: bool, model: ModelCfg | None, transform: Callable[[Any], Any] | None
          ) -> Loaded:
    from ..checkpoint_weights import pick_weights
    from ..inference.onnx_network import OnnxNetwork
    from .onnx_cache import GraphRequest, cached_graph, index_graph, optimised_path

    which, _ = pick_weights(file.state, weights, file.source)  # a wrong --weights: said now
    request = GraphRequest(weights, size, coarse, choice.precision, model)

    def calibration() -> list:
        from .quantize import calibration_batches

        if transform is None:
            raise ValueError("int8 needs the inference transform for its calibration")
        return calibration_batches(transform)

    path, _ = cached_graph(file, request, calibration)
    if model is None and transform is not None:
        index_graph(file, request, path, getattr(transform, "preprocess", "sodkit"))
    return Loaded(OnnxNetwork(path, threads, coarse, optimised=optimised_path(path)), choice,
                  "fp32", which)
