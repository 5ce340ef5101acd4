"""The forward pass of inference: a batch of normalised images -> the scores the pipeline's
output side takes, with test-time augmentation (``eval.tta``); and arrays in, maps out.

:func:`predict_scores` is the one place a network runs at inference (the trainer's evaluation,
``sodkit predict`` and ``test``, the server, the API): onnxruntime runs here too, as a network
(:class:`~sodkit.inference.onnx_network.OnnxNetwork`, chosen where the model is loaded:
:mod:`sodkit.runners`), and everything around it (the transforms, the resize back, the
encoding, the ranks' rounds) stays as it is. The runtime it is given is anything with a
``device`` and an ``autocast(precision)`` (:class:`ForwardRuntime`): the engine's
:class:`~sodkit.engine.runtime.Runtime`, or :class:`~sodkit.engine.runtime.OnDevice` outside a
training job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from .pipelines import postprocess_of
from .postprocess import Postprocess

TTA = ("hflip",)  # eval.tta values


class ForwardRuntime(Protocol):
    """What the forward asks of the process it runs in."""

    device: torch.device

    def autocast(self, precision: str | None = None) -> Any: ...


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Evaluate with ``no_grad`` in eval mode, restoring the previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield model
    finally:
        model.train(was_training)


def predict_probabilities(
    model: nn.Module, images: torch.Tensor, runtime: ForwardRuntime, precision: str = "fp32",
    tta: Sequence[str] = (),
) -> torch.Tensor:
    """Saliency probabilities (B, 1, h, w) in float32 for a normalised batch; the forward runs
    at ``precision`` (``eval.precision``: fp32 unless the config says otherwise).

    ``tta`` (``eval.tta``): ``hflip`` adds a pass on the mirrored images, mirrored back; the
    result is the mean of the passes' probabilities (averaging probabilities, not logits, so
    one confident pass cannot outvote the other without bound).
    """
    unknown = set(tta) - set(TTA)
    if unknown:
        raise ValueError(f"eval.tta: unknown {sorted(unknown)} (known: {list(TTA)})")
    with runtime.autocast(precision):
        logits = model(images)["logits"]
    probs = torch.sigmoid(logits.float())
    if "hflip" in tta:
        with runtime.autocast(precision):
            flipped = model(images.flip(-1))["logits"]
        probs = (probs + torch.sigmoid(flipped.float()).flip(-1)) / 2
    return probs


def predict_scores(model: nn.Module, images: torch.Tensor, runtime: ForwardRuntime,
                   post: Postprocess, precision: str = "fp32", tta: Sequence[str] = ()
                   ) -> torch.Tensor:
    """What ``post.to_mask`` takes, for a normalised batch: sodkit's and MINet's are the
    probabilities (:func:`predict_probabilities`); F3Net's the coarse logits of each pass
    (B, passes, h, w), mirrored passes mirrored back."""
    if not post.coarse:
        return predict_probabilities(model, images, runtime, precision, tta)
    unknown = set(tta) - set(TTA)
    if unknown:
        raise ValueError(f"eval.tta: unknown {sorted(unknown)} (known: {list(TTA)})")
    passes = [_coarse_logits(model, images, runtime, precision)]
    if "hflip" in tta:
        passes.append(_coarse_logits(model, images.flip(-1), runtime, precision).flip(-1))
    return torch.cat(passes, dim=1)


def _coarse_logits(model: nn.Module, images: torch.Tensor, runtime: ForwardRuntime,
                   precision: str) -> torch.Tensor:
    with runtime.autocast(precision):
        out = model(images)
    return out.get("coarse_logits", out["logits"]).float()


def predict_arrays(
    model: nn.Module,
    images: Sequence[np.ndarray],
    transform: Callable[[np.ndarray], torch.Tensor],
    runtime: ForwardRuntime,
    batch_size: int = 8,
    tta: Sequence[str] = (),
    precision: str = "fp32",
) -> Iterator[np.ndarray]:
    """Probability maps (float32 (H, W) in [0, 1], each at its image's own size) of uint8 RGB
    arrays, in order: the Python API's path (frames of a video would take it too), with
    ``sodkit predict``'s transform, forward and resize (whose PNGs are these maps quantised),
    the transform's pipeline included (:mod:`sodkit.inference.pipelines`)."""
    post = postprocess_of(transform)
    with eval_mode(model):
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            batch = torch.stack([transform(image) for image in chunk]).to(runtime.device)
            probs = predict_scores(model, batch, runtime, post, precision, tta=tta)
            for i, image in enumerate(chunk):
                prob = post.probability_map(probs[i : i + 1], tuple(image.shape[:2]))
                yield prob.float().cpu().numpy()
