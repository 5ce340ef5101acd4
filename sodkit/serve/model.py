"""The model as the server uses it: bytes in, the PNG files of ``sodkit predict --save`` out.

A request's image goes through three steps, so that the one that needs the model in one thread
(the forward) is the only one the batching worker runs:

1. :meth:`ServedModel.prepare` (a request's thread): decode the bytes as ``sodkit predict``
   reads a file (:func:`sodkit.imageio.read_image_alpha`: the header's pixel count checked
   before any decoder allocates them, the EXIF orientation applied, the alpha kept for a
   cut-out) and apply the model's test transform;
2. :meth:`ServedModel.forward` (the batching worker): one forward pass for a batch of them
   (:func:`sodkit.inference.forward.predict_scores`, as ``sodkit predict``'s);
3. :meth:`ServedModel.encode` (a request's thread): each output kind, made from the scores by
   :func:`sodkit.inference.encode.encode_outputs`, the function ``sodkit predict`` makes its
   files with. So a response is the file ``sodkit predict --save KIND`` writes for the same
   photo, byte for byte, by construction (tests/test_serve.py compares them).

The model is loaded by :func:`sodkit.trained.load_trained` (a checkpoint, a model file, or a
name), as every command loads one. This module adds only what is HTTP's: the status of each
refusal (:func:`decode`) and the options of a request (:func:`outputs_of`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError, UserError
from .upload import RequestError

if TYPE_CHECKING:
    import torch

    from ..inference.render import Rendering
    from ..trained import Trained

MAX_KINDS = 5


@dataclass(frozen=True)
class Outputs:
    """What a request asks for: ``(kind, rendering)`` pairs (rendering None: the mask)."""

    kinds: tuple[tuple[str, Rendering | None], ...]

    @property
    def needs_image(self) -> bool:
        return any(r is not None and r.needs_image for _, r in self.kinds)


def outputs_of(options: dict[str, str]) -> Outputs:
    """``save`` (one kind or several, comma-separated; default ``mask``), ``threshold``,
    ``background`` and ``tint`` as ``sodkit predict``'s options; 400 for a bad one."""
    from ..inference.render import MODES, Rendering, parse_color

    kinds = [k.strip().lower() for k in options.get("save", "mask").split(",") if k.strip()]
    unknown = [k for k in kinds if k not in MODES]
    if not kinds or unknown or len(kinds) > MAX_KINDS:
        raise RequestError(400, f"save={options.get('save', '')[:60]!r}: choose one or more "
                                f"of {', '.join(MODES)} (comma-separated)")
    try:
        threshold = float(options.get("threshold", "0.5"))
    except ValueError:
        threshold = float("nan")
    if not 0.0 <= threshold <= 1.0:
        raise RequestError(400, f"threshold={options['threshold'][:40]!r}: a number in [0, 1]")
    try:
        background = parse_color(options["background"]) if "background" in options else None
        tint = parse_color(options.get("tint", "red"))
        pairs = tuple((kind, None if kind == "mask" else Rendering(
            kind, threshold, background if kind == "cutout" else None, tint))
            for kind in dict.fromkeys(kinds))
    except UserError as exc:
        raise RequestError(400, str(exc)) from None
    return Outputs(pairs)


@dataclass
class Prepared:
    """One decoded request image: the network's input and what the outputs need."""

    tensor: torch.Tensor  # (3, S, S), the model's test transform of the image
    size: tuple[int, int]  # the image's (H, W)
    image: np.ndarray | None  # uint8 RGB (H, W, 3), kept for cut-outs and overlays
    alpha: np.ndarray | None = None  # the image's own alpha (uint8 (H, W)), kept for cut-outs


class ServedModel:
    """A loaded model (:class:`sodkit.trained.Trained`) with the steps above."""

    def __init__(self, model: Trained, name: str, catalogue: dict[str, Any] | None = None,
                 runner: str = "PyTorch fp32", precision: str = "fp32") -> None:
        from ..engine.runtime import OnDevice
        from ..inference.pipelines import build_test_transform, postprocess_of

        self.model, self.name, self.catalogue = model, name, catalogue or {}
        self.transform = build_test_transform(model.config.data, size=model.input_size)
        self.post = postprocess_of(self.transform)
        self.tta = list(model.config.eval.tta)  # as sodkit predict without --tta
        self.runtime = OnDevice(model.device)
        self.runner, self.precision = runner, precision  # what runs the forward, its autocast

    def prepare(self, data: bytes, keep_image: bool) -> Prepared:
        image, alpha = decode(data)
        return Prepared(self.transform(image), tuple(image.shape[:2]),
                        image if keep_image else None, alpha if keep_image else None)

    def forward(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The scores of each input, (1, C, h, w) on the model's device (where ``sodkit
        predict`` resizes them too), from one forward pass."""
        import torch

        from ..inference.forward import predict_scores

        with torch.inference_mode():
            batch = torch.stack(list(inputs)).to(self.model.device)
            scores = predict_scores(self.model.network, batch, self.runtime, self.post,
                                    self.precision, tta=self.tta)
        return [scores[i : i + 1].clone() for i in range(len(inputs))]

    def encode(self, prepared: Prepared, scores: torch.Tensor, outputs: Outputs
               ) -> dict[str, bytes]:
        """Each kind's PNG bytes, as ``sodkit predict`` writes them."""
        import torch

        from ..inference.encode import encode_outputs

        with torch.inference_mode():
            return dict(encode_outputs(self.post, scores, prepared.size, outputs.kinds,
                                       prepared.image, prepared.alpha))

    def describe(self) -> dict[str, Any]:
        """The model for ``GET /info``: its name, file, provenance and licence where known."""
        model = self.model
        return {"name": self.name, "file": model.source.name, "weights": model.weights,
                "network": model.config.model.name, "backbone": model.config.model.backbone,
                "input_size": model.input_size, "preprocess": getattr(self.transform, "preprocess",
                                                                "sodkit"),
                "tta": self.tta, "runtime": self.runner, "provenance": model.provenance,
                "licence": self.catalogue.get("licence"),
                "catalogue": self.catalogue or None}


def decode(data: bytes) -> tuple[np.ndarray, np.ndarray | None]:
    """The uint8 RGB pixels of an uploaded file and its own alpha (None: it has none), as
    ``sodkit predict`` reads a file, within sodkit's limits: 413 for a header over
    ``SODKIT_MAX_PIXELS`` (before a decoder sees it), 415 for bytes of no image format, 400 for
    a damaged file."""
    from ..imageio import read_header, read_image_alpha, sniff_format

    name = "the image"
    if sniff_format(data[:16]) is None:
        raise RequestError(415, "the body is no image: its content is no JPEG, PNG, BMP, TIFF, "
                                "WebP or GIF")
    try:
        read_header(data, name)  # only the pixel limit raises here
    except DataError as exc:
        raise RequestError(413, str(exc)) from None
    try:
        return read_image_alpha(name, encoded=data)
    except DataError as exc:
        reason = re.sub(r"[;,] replace or remove it", "", str(exc))  # a file's advice
        reason = reason.replace(f"image file {name}", name)
        raise RequestError(400, reason) from None


CATALOGUE_KEYS = ("title", "task", "licence", "commercial", "licence_note", "page", "paper",
                  "url", "backbone", "params")


def load_served(source: str, by_name: bool, device: str = "auto", weights: str = "auto",
                size: int | None = None, runtime: str = "auto", precision: str = "fp32"
                ) -> ServedModel:
    """A model by path or (``by_name``) by its name in the catalogue (fetched and cached
    first), loaded by :func:`sodkit.trained.load_trained`; what the catalogue says of it (the
    licence) comes along where it is known: the name given, or the one a fetched model file
    records."""
    from pathlib import Path

    from ..published.catalogue import get_entry
    from ..published.fetch import fetch_model

    path = fetch_model(source) if by_name else Path(source)
    if not by_name and not path.is_file():
        raise UserError(f"checkpoint not found: {source}")
    model, runner = _load(path, weights, device, size, runtime, precision)
    name = source if by_name else model.provenance.get("model")
    catalogue = None
    if isinstance(name, str):
        try:
            entry = get_entry(name).as_dict()
            catalogue = {key: entry[key] for key in CATALOGUE_KEYS if entry.get(key) is not None}
        except UserError:  # a model file naming a model this catalogue does not know
            catalogue = None
    return ServedModel(model, source if by_name else path.name, catalogue, runner.choice.name,
                       runner.precision)


def _load(path: Any, weights: str, device: str, size: int | None, runtime: str,
          precision: str) -> tuple[Trained, Any]:
    """The model on ``runtime`` at ``precision`` (:mod:`sodkit.runners`), as a
    :class:`~sodkit.trained.Trained` (an onnxruntime session in its network's place)."""
    import torch

    from ..inference.pipelines import build_test_transform, postprocess_of
    from ..runners.choice import choose
    from ..runners.load import load_runner
    from ..trained import Trained, check_request, device_of, read_trained

    check_request(weights, size)
    target = device_of(device)
    chosen = choose(runtime, precision, target.type)
    file = read_trained(path)
    side = size or file.config.data.size
    transform = build_test_transform(file.config.data, size=side)
    runner = load_runner(file, chosen, size=side, threads=torch.get_num_threads(),
                         weights=weights, device=target, coarse=postprocess_of(transform).coarse,
                         transform=transform)
    return Trained(runner.network, file, runner.weights, target, size, file.provenance), runner
