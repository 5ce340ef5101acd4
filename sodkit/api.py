"""The Python API: a trained model in a few lines, with the same results as ``sodkit predict``.

    import sodkit
    model = sodkit.load("model.safetensors", device="auto")   # or a checkpoint, or a name
                                                              # ("birefnet-general-lite")
    mask = model.predict("photo.jpg")                         # float32 (H, W) in [0, 1]
    rgba = model.cutout("photo.jpg")                          # PIL RGBA, the mask as alpha

Predictions go through ``sodkit predict``'s own path (:func:`sodkit.engine.predictor.
predict_arrays`: the checkpoint's test transform, the forward, the bilinear resize to each
image's size), so a map equals the PNG ``sodkit predict`` writes, divided by 255, to the uint8
rounding. Loading a model imports torch; ``import sodkit`` alone does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .errors import UserError

if TYPE_CHECKING:
    import torch
    from PIL import Image as PILImage

    from .config import Config

ImageInput = Union[str, Path, "PILImage.Image", np.ndarray, "torch.Tensor"]
PRECISIONS = ("fp32", "bf16", "fp16")

__all__ = ["ImageInput", "Model", "load"]


@dataclass
class _Local:
    """What :func:`~sodkit.engine.evaluator.predict_probabilities` asks of a runtime (its device
    and autocast), without a Runtime's process-wide effects (seeding, threads, process group)."""

    device: Any
    amp_dtype: Any = None

    def autocast(self, precision: str | None = None) -> Any:
        from .engine.runtime import Runtime

        return Runtime.autocast(self, precision)  # type: ignore[arg-type]


def _device(name: str) -> Any:
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r}: CUDA is not available here")
    return device


def _as_rgb(item: Any) -> np.ndarray:
    """One input as the uint8 RGB (H, W, 3) array ``sodkit predict`` makes of a file."""
    if isinstance(item, (str, Path)):
        from .imageio import read_image

        if not Path(item).is_file():
            raise UserError(f"image not found: {item}")
        return read_image(item)
    if type(item).__module__.startswith("PIL."):
        return np.array(item.convert("RGB"))  # a copy: torch wants writable memory
    if type(item).__module__.startswith("torch"):
        return _tensor_rgb(item)
    if isinstance(item, np.ndarray):
        if item.dtype == np.uint8 and item.ndim == 3 and item.shape[2] == 3:
            return item if item.flags.writeable else item.copy()
        if item.dtype == np.uint8 and item.ndim == 2:
            return np.repeat(item[:, :, None], 3, axis=2)
        raise UserError(f"an array image must be uint8 (H, W, 3) RGB or (H, W) grey, got "
                        f"{item.dtype} {item.shape}")
    raise UserError(f"cannot predict a {type(item).__name__}: give a path, a PIL image, a uint8 "
                    f"(H, W, 3) array or a (3, H, W) tensor")


def _tensor_rgb(tensor: Any) -> np.ndarray:
    """A (3, H, W) tensor, uint8 or float in [0, 1] (quantised to uint8 as a file would be)."""
    import torch

    if tensor.ndim != 3 or tensor.shape[0] != 3:
        raise UserError(f"a tensor image must be (3, H, W), got {tuple(tensor.shape)}")
    if tensor.dtype != torch.uint8:
        if not tensor.is_floating_point():
            raise UserError(f"a tensor image must be uint8 or float in [0, 1], got {tensor.dtype}")
        tensor = tensor.detach().float().mul(255.0).round_().clamp_(0, 255).to(torch.uint8)
    return tensor.detach().cpu().permute(1, 2, 0).contiguous().numpy()


@dataclass
class Model:
    """A trained network ready to predict; made by :func:`load`."""

    network: Any
    config: Config
    source: Path
    weights: str  # "ema" or "model": which weights of the file were loaded
    device: Any
    size: int
    provenance: dict[str, Any] = field(default_factory=dict)

    def predict(self, images: ImageInput | Sequence[ImageInput], *, batch_size: int = 8,
                tta: Sequence[str] | None = None, precision: str = "fp32"
                ) -> np.ndarray | list[np.ndarray]:
        """Saliency maps, float32 (H, W) in [0, 1] at each image's own size: one array for one
        image, a list for a list. ``tta``: ``["hflip"]`` or ``[]`` (default: the config's
        ``eval.tta``, as ``sodkit predict``); ``precision``: ``bf16`` or ``fp16`` on CUDA."""
        single = not isinstance(images, (list, tuple))
        arrays = [_as_rgb(item) for item in ([images] if single else images)]
        maps = self._maps(arrays, batch_size, tta, precision)
        return maps[0] if single else maps

    def cutout(self, images: ImageInput | Sequence[ImageInput], *,
               background: str | tuple[int, int, int] | None = None,
               estimate_foreground: bool = False, foreground: str | None = None,
               batch_size: int = 8, tta: Sequence[str] | None = None,
               precision: str = "fp32") -> Any:
        """The image with its mask as alpha (PIL RGBA at the image's size), as ``sodkit predict
        --save cutout``; on a solid ``background`` (name, ``#RRGGBB`` or RGB) an RGB image.
        ``foreground``: the estimator of the object's colours on soft edges, ``blur-fusion``
        (BiRefNet's fast one), ``ml`` (pymatting's: needs ``sodkit[cutout]``) or ``none``
        (default); ``estimate_foreground=True`` is ``foreground="ml"``."""
        from PIL import Image

        from .cutout import cutout, parse_color
        from .foreground import check_estimator

        if estimate_foreground and foreground not in (None, "ml"):
            raise ValueError(f"estimate_foreground=True means foreground='ml', not "
                             f"{foreground!r}")
        chosen = check_estimator(foreground or ("ml" if estimate_foreground else "none"))
        color = parse_color(background) if isinstance(background, str) else background
        single = not isinstance(images, (list, tuple))
        arrays = [_as_rgb(item) for item in ([images] if single else images)]
        maps = self._maps(arrays, batch_size, tta, precision)
        out = [Image.fromarray(cutout(a, m, color, chosen))
               for a, m in zip(arrays, maps, strict=True)]
        return out[0] if single else out

    def _maps(self, arrays: list[np.ndarray], batch_size: int, tta: Sequence[str] | None,
              precision: str) -> list[np.ndarray]:
        from .data import build_test_transform
        from .engine.evaluator import TTA
        from .engine.predictor import predict_arrays

        if batch_size < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size}")
        if precision not in PRECISIONS:
            raise UserError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
        if precision != "fp32" and self.device.type != "cuda":
            raise UserError(f"precision {precision}: reduced precision runs on CUDA only; this "
                            f"model is on {self.device}")
        tta = list(self.config.eval.tta if tta is None else tta)
        if set(tta) - set(TTA):
            raise UserError(f"tta {tta}: known are {list(TTA)}")
        transform = build_test_transform(self.config.data, size=self.size)
        return list(predict_arrays(self.network, arrays, transform, _Local(self.device),
                                   batch_size, tta, precision))


def load(path: str | Path, device: str = "auto", weights: str = "auto",
         size: int | None = None) -> Model:
    """A model file (``.safetensors``, from ``sodkit export --model``), a training checkpoint,
    or a model's name (``sodkit models`` lists them: fetched, verified and converted on first
    use, then read from the cache; an existing file of that name wins), on ``device``
    (``auto``: CUDA when there is one). ``weights`` as ``--weights``: ``auto`` (EMA when the
    checkpoint has it), ``ema`` or ``model``; ``size``: the network's input side (default: the
    training size, as ``sodkit predict``)."""
    from .config.schema import MAX_SIZE, MIN_SIZE
    from .network import build_network
    from .published.fetch import model_source
    from .torchfile import load_checkpoint
    from .trained import checkpoint_config, load_weights

    if weights not in ("auto", "ema", "model"):
        raise UserError(f"weights {weights!r}: choose auto, ema or model")
    if size is not None and not MIN_SIZE <= size <= MAX_SIZE:
        raise UserError(f"size {size}: must be in [{MIN_SIZE}, {MAX_SIZE}]")
    source = model_source(path)
    state = load_checkpoint(source, mmap=True)
    cfg = checkpoint_config(state, source)
    target = _device(device)
    network = build_network(replace(cfg.model, pretrained=None), initialise=False)  # the file's
    which = load_weights(network, state, source, weights)
    return Model(network.to(target).eval(), cfg, source, which, target, size or cfg.data.size,
                 dict(state.get("provenance", {})))
