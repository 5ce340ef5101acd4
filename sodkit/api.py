"""The Python API: a trained model in a few lines, with the same results as ``sodkit predict``.

    import sodkit
    model = sodkit.load("model.safetensors", device="auto")   # or a checkpoint, or a name
                                                              # ("birefnet-general-lite")
    mask = model.predict("photo.jpg")                         # float32 (H, W) in [0, 1]
    rgba = model.cutout("photo.jpg")                          # PIL RGBA, the mask as alpha
    on_white = model.cutout("photo.jpg", mask=mask, background="white")  # no second forward
    png = model.cutout(open("photo.jpg", "rb").read())        # bytes in, PNG bytes out
    for mask in model.predict_video("clip.mp4", out="clip.mkv"):  # a map a frame, streamed
        ...                                                   # (and a lossless mask video)

Predictions go through ``sodkit predict``'s own path (:func:`sodkit.inference.forward.
predict_arrays`: the checkpoint's test transform, the forward, the bilinear resize to each
image's size), so a map equals the PNG ``sodkit predict`` writes, divided by 255, to the uint8
rounding. Every kind of input (path, bytes, PIL, array, tensor) goes through one conversion,
:mod:`sodkit.image_input`, which reads its values as a file's are read and refuses, in one line,
what it would otherwise read wrong (a float image on the 0-255 scale, NaN, an empty image). The
default batch is chosen from the input side and the memory (:mod:`sodkit.engine.batch_memory`).
Loading a model imports torch; ``import sodkit`` alone does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .errors import UserError

if TYPE_CHECKING:
    import torch
    from PIL import Image as PILImage

    from .config import Config
    from .video.maps import VideoMaps

ImageInput = Union[str, Path, bytes, "PILImage.Image", np.ndarray, "torch.Tensor"]
PRECISIONS = ("fp32", "bf16", "fp16")  # of predict(precision=...): PyTorch's autocast

__all__ = ["ImageInput", "Model", "load"]


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
    runtime: str = "PyTorch fp32"  # what runs the forward (sodkit.load's runtime, precision)
    precision: str = "fp32"  # the forward's autocast unless predict() is given another
    _memory: dict[tuple, int | None] = field(default_factory=dict, repr=False)

    def predict(self, images: ImageInput | Sequence[ImageInput], *,
                batch_size: int | None = None, tta: Sequence[str] | None = None,
                precision: str | None = None) -> np.ndarray | list[np.ndarray]:
        """Saliency maps, float32 (H, W) in [0, 1] at each image's own size: one array for one
        image, a list for a list. An image is a path, a file's bytes, a PIL image, an array
        or a tensor (:mod:`sodkit.image_input`). ``batch_size``: images per forward pass
        (default: chosen from the input side and the memory, as ``sodkit predict`` does);
        ``tta``: ``["hflip"]`` or ``[]`` (default: the config's ``eval.tta``); ``precision``
        (PyTorch's autocast; default: :func:`load`'s): ``bf16`` on CUDA or a CPU with bf16
        units, ``fp16`` on CUDA."""
        single, items = _items(images)
        maps = [prob for _, _, _, prob in self._run(items, batch_size, tta, precision)]
        return maps[0] if single else maps

    def cutout(self, images: ImageInput | Sequence[ImageInput], *, mask: Any = None,
               background: Any = None, estimate_foreground: bool = False,
               foreground: str | None = None, batch_size: int | None = None,
               tta: Sequence[str] | None = None, precision: str | None = None) -> Any:
        """The image with its mask as alpha (RGBA, times the image's own alpha), as ``sodkit
        predict --save cutout``; on a ``background`` an RGB image: a colour (name, ``#RRGGBB``,
        ``"R,G,B"`` or three integers in 0-255), ``"blur"``, or an image (a file, bytes, PIL,
        array, tensor; scaled to cover the photo). A PIL image for each input, PNG bytes for
        bytes (as rembg's ``remove``). ``mask``: the mask already computed (``predict``'s map,
        a mask file, ...; a list for a list), so no forward pass runs. ``foreground``: the
        estimator of the object's colours on soft edges, ``blur-fusion`` (BiRefNet's fast
        one), ``ml`` (pymatting's: needs ``sodkit[cutout]``) or ``none`` (default);
        ``estimate_foreground=True`` is ``foreground="ml"``."""
        from .foreground import check_estimator
        from .image_input import background_input

        if estimate_foreground and foreground not in (None, "ml"):
            raise UserError(f"estimate_foreground=True means foreground='ml', not "
                            f"{foreground!r}")
        chosen = check_estimator(foreground or ("ml" if estimate_foreground else "none"))
        under = background_input(background)  # checked before any work
        single, items = _items(images)
        done = (self._run(items, batch_size, tta, precision, chosen)
                if mask is None else _given(items, mask, single, chosen))
        out = [_picture(item, _cutout(rgb, prob, under, chosen, alpha))
               for item, rgb, alpha, prob in done]
        return out[0] if single else out

    def predict_video(self, video: str | Path | Iterable[ImageInput],
                      out: str | Path | None = None, *, save: str = "mask",
                      fps: float | None = None, force: bool = False,
                      batch_size: int | None = None, tta: Sequence[str] | None = None,
                      precision: str = "fp32") -> VideoMaps:
        """A clip's saliency maps, one float32 (H, W) in [0, 1] a frame, as an iterator (the
        clip is read, predicted and written as a stream: memory bounded whatever its length);
        each equals :meth:`predict` of the same frame as an image. ``video``: a video file, or
        an iterable of frames (arrays, PIL images, ...; one size). ``out``: also write the
        ``save`` kind (as ``sodkit predict --save``), ``NAME.mkv`` (a lossless FFV1 video:
        mask, binary, overlay) or a folder of PNG frames (cutout, soft), complete when the
        iterator is exhausted; ``fps``: the frames' rate, needed to write frames given as an
        iterable; ``force``: replace a file sodkit did not write. The rest as :meth:`predict`;
        the options are checked at the call (:mod:`sodkit.video.maps`). The iterator has the
        clip's ``fps``, ``frames`` (its declared count), ``height`` and ``width``."""
        from .engine.runtime import OnDevice
        from .inference.pipelines import build_test_transform
        from .video.maps import video_maps

        tta = self._check(batch_size, tta, precision)
        transform = build_test_transform(self.config.data, size=self.size)
        batch = self._batch(transform, batch_size, tta, precision)
        return video_maps(self.network, video, transform, OnDevice(self.device), batch, tta,
                          precision, out=out, save=save, fps=fps, force=force)

    def _run(self, items: list[Any], batch_size: int | None, tta: Sequence[str] | None,
             precision: str | None, foreground: str = "none") -> Iterator[tuple]:
        """``(item, rgb, alpha, probability map)`` of each item, in order: the options checked
        first, then each batch decoded, checked and predicted in turn (at most one batch of
        decoded images in memory, besides the results)."""
        from .engine.runtime import OnDevice
        from .foreground import check_foreground_memory
        from .image_input import image_of
        from .inference.forward import predict_arrays
        from .inference.pipelines import build_test_transform

        precision = self.precision if precision is None else precision
        tta = self._check(batch_size, tta, precision)
        single = len(items) == 1
        for i, item in enumerate(items):  # what can be checked without decoding
            if isinstance(item, (str, Path)) and not Path(item).is_file():
                raise UserError(f"{_name(i, single)} not found: {item}")
        transform = build_test_transform(self.config.data, size=self.size)
        batch = self._batch(transform, batch_size, tta, precision)
        for start in range(0, len(items), batch):
            chunk = items[start : start + batch]
            decoded = [image_of(item, _name(start + j, single))
                       for j, item in enumerate(chunk)]
            if foreground == "ml":  # pymatting's memory; blur-fusion's is a few copies
                for j, (rgb, _) in enumerate(decoded):
                    check_foreground_memory(*rgb.shape[:2], _name(start + j, single))
            maps = predict_arrays(self.network, [rgb for rgb, _ in decoded], transform,
                                  OnDevice(self.device), batch, tta, precision)
            for item, (rgb, alpha), prob in zip(chunk, decoded, maps, strict=True):
                yield item, rgb, alpha, prob

    def _check(self, batch_size: int | None, tta: Sequence[str] | None, precision: str
               ) -> list[str]:
        from .inference.forward import TTA

        if batch_size is not None and (not isinstance(batch_size, int)
                                       or isinstance(batch_size, bool) or batch_size < 1):
            raise UserError(f"batch_size must be a whole number >= 1 (or None: chosen from "
                            f"the memory), got {batch_size!r}")
        if precision not in PRECISIONS:
            raise UserError(f"precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
        if precision != "fp32":
            from .runners.choice import bf16_problem

            problem = (bf16_problem(self.device.type) if precision == "bf16" else
                       None if self.device.type == "cuda" else "it runs on CUDA only")
            if problem:
                raise UserError(f"precision {precision}: {problem}")
        if precision != self.precision and self.runtime.startswith("onnxruntime"):
            raise UserError(f"precision {precision}: this model runs on {self.runtime}; give "
                            f"the precision to sodkit.load (runtime='torch' for autocast)")
        tta = list(self.config.eval.tta if tta is None else tta)
        if set(tta) - set(TTA):
            raise UserError(f"tta {tta}: known are {list(TTA)}")
        return tta

    def _batch(self, transform: Any, batch_size: int | None, tta: list[str],
               precision: str) -> int:
        """``batch_size``, or the default batch (:mod:`sodkit.engine.batch_memory`); either
        refused where its memory exceeds the budget. The probe runs once per setting."""
        from .engine.batch_memory import choose_batch, worth_probing
        from .engine.predictor import probe_memory
        from .engine.runtime import OnDevice

        key = (self.size, tuple(tta), precision)
        if key not in self._memory and not worth_probing(self.size, self.device, batch_size):
            return choose_batch(None, self.size, self.device, batch_size, "batch_size").batch
        if key not in self._memory:
            self._memory[key] = probe_memory(self.network, transform, OnDevice(self.device),
                                             self.size, tta, precision)
        return choose_batch(self._memory[key], self.size, self.device, batch_size,
                            "batch_size").batch


def _items(images: Any) -> tuple[bool, list[Any]]:
    """``(single, items)``: a list or tuple is several inputs, anything else one."""
    if isinstance(images, (list, tuple)):
        return False, list(images)
    return True, [images]


def _given(items: list[Any], mask: Any, single: bool, foreground: str) -> Iterator[tuple]:
    """``(item, rgb, alpha, map)`` of each item with its map given (``cutout(mask=...)``):
    no forward pass."""
    from .foreground import check_foreground_memory
    from .image_input import image_of, mask_of

    masks = [mask] if single else _items(mask)[1]
    if len(masks) != len(items):
        raise UserError(f"{len(masks)} masks for {len(items)} images: give one mask an image")
    for i, (item, given) in enumerate(zip(items, masks, strict=True)):
        rgb, alpha = image_of(item, _name(i, single))
        if foreground == "ml":
            check_foreground_memory(*rgb.shape[:2], _name(i, single))
        yield item, rgb, alpha, mask_of(given, rgb.shape[:2], _name(i, single, "mask"))


def _name(index: int, single: bool, what: str = "image") -> str:
    """How an input is named in messages: ``image``, or ``image 3`` (from 0) of a list."""
    return what if single else f"{what} {index}"


def _cutout(rgb: np.ndarray, prob: np.ndarray, under: Any, foreground: str,
            alpha: np.ndarray | None) -> np.ndarray:
    from .inference.render import cutout

    return cutout(rgb, prob, under, foreground, alpha)


def _picture(item: Any, array: np.ndarray) -> Any:
    """A cut-out as the caller gave its image: PNG bytes for bytes, else a PIL image."""
    from .image_input import is_bytes

    if is_bytes(item):
        from .inference.render import encode_png

        return encode_png(array)
    from PIL import Image

    return Image.fromarray(array)


def load(path: str | Path, device: str = "auto", weights: str = "auto",
         size: int | None = None, runtime: str = "auto", precision: str = "fp32") -> Model:
    """A model file (``.safetensors``, from ``sodkit export --model``), a training checkpoint,
    or a model's name (``sodkit models`` lists them: fetched, verified and converted on first
    use, then read from the cache; an existing file of that name wins), on ``device``
    (``auto``: CUDA when there is one). ``weights`` as ``--weights``: ``auto`` (EMA when the
    checkpoint has it), ``ema`` or ``model``; ``size``: the network's input side (default: the
    training size, as ``sodkit predict``). ``runtime`` and ``precision`` as ``sodkit predict
    --runtime / --precision`` (:mod:`sodkit.runners.choice`: ``auto`` is onnxruntime on the CPU
    where it is installed, its graph exported once and cached). Loaded by
    :func:`sodkit.runners.load.load_runner`."""
    import torch

    from .inference.pipelines import build_test_transform, postprocess_of
    from .runners.choice import choose
    from .runners.load import load_runner
    from .trained import check_request, device_of, read_trained

    check_request(weights, size)
    target = device_of(device)
    chosen = choose(runtime, precision, target.type, "runtime")
    file = read_trained(path, by_name=True)
    side = size or file.config.data.size
    transform = build_test_transform(file.config.data, size=side)
    loaded = load_runner(file, chosen, size=side, threads=torch.get_num_threads(),
                         weights=weights, device=target, coarse=postprocess_of(transform).coarse,
                         transform=transform)
    return Model(loaded.network, file.config, file.source, loaded.weights, target, side,
                 file.provenance, loaded.choice.name, loaded.precision)
