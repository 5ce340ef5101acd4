"""What the Python API takes as an image, a mask or a background, made into the arrays that
``sodkit predict`` makes of a file: one path for every kind of input, so that the same pixels
give the same map whatever they came in.

An image may be a path, a file's bytes (``bytes``, ``bytearray``, ``memoryview``: what rembg's
``remove(data)`` takes), a PIL image, a numpy array or a torch tensor. Each becomes numpy pixels
first (a tensor (C, H, W) is put channels last; a PIL image keeps its bit depth: ``I;16`` is
uint16, ``F`` float32), then one function, :func:`_as_uint8`, reads the values as a file's are
read:

* uint8 as they are; uint16 by their high byte, as a 16-bit PNG is read (``>> 8``);
* other integers only where they lie in 0-255;
* floats only on the 0-1 scale, finite (a NaN would be read as black, 0-255 values as white);
  rounded to the nearest level;
* booleans, complex numbers and objects are refused.

Channels: grey (H, W) or (H, W, 1), grey + alpha (H, W, 2), RGB (H, W, 3), RGBA (H, W, 4); the
alpha is dropped for the forward pass, as ``sodkit predict`` drops it, and kept for a cut-out.
An empty image and one over ``SODKIT_MAX_PIXELS`` are refused. Every refusal is one
:class:`~sodkit.errors.UserError` line that names the input and says what to give instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from .errors import DataError, UserError
from .limits import max_file_bytes, max_pixels

ImageInput = Any  # str | Path | bytes | PIL.Image.Image | np.ndarray | torch.Tensor
# a float within half a level of [0, 1] rounds into it: allowed (a resize's overshoot)
_FLOAT_SLACK = 0.5 / 255
_BYTES = (bytes, bytearray, memoryview)


def is_bytes(item: object) -> bool:
    return isinstance(item, _BYTES)


def image_of(item: ImageInput, what: str = "image") -> tuple[np.ndarray, np.ndarray | None]:
    """``item`` as uint8 RGB (H, W, 3), writable, and its own alpha (uint8 (H, W)) or None."""
    if isinstance(item, (str, Path)):
        from .imageio import read_image_alpha

        if not Path(item).is_file():
            raise UserError(f"{what} not found: {item}")
        return read_image_alpha(item)
    if is_bytes(item):
        from .imageio import read_image_alpha

        return _from_bytes(item, what, read_image_alpha)
    return _rgb_alpha(_as_uint8(_pixels(item, what), what), what)


def _from_bytes(item: Any, what: str, read: Any) -> Any:
    data = bytes(item)
    if len(data) > max_file_bytes():
        raise UserError(f"{what}: {len(data)} bytes, more than SODKIT_MAX_FILE_MB allows for one "
                        f"image file")
    try:
        return read(f"the {len(data)} bytes given as {what}", data)
    except DataError as exc:
        raise UserError(str(exc).replace("; replace or remove it", "")) from None


def _pixels(item: Any, what: str) -> np.ndarray:
    """numpy pixels of a PIL image, an array or a tensor, channels last, values untouched."""
    module = type(item).__module__
    if module.startswith("PIL."):
        return _pil_pixels(item)
    if module.startswith("torch"):
        return _tensor_pixels(item, what)
    if isinstance(item, np.ndarray):
        if item.ndim == 3 and item.shape[0] in (1, 3, 4) and item.shape[2] > 4:
            raise UserError(f"{what}: an array of shape {item.shape} looks channels-first; give "
                            f"(H, W, 3) (array.transpose(1, 2, 0))")
        return item
    raise UserError(f"cannot read a {type(item).__name__} as {what}: give a path, the file's "
                    f"bytes, a PIL image, an (H, W, 3) or (H, W) array, or a (3, H, W) tensor")


def _pil_pixels(image: Any) -> np.ndarray:
    """A PIL image's pixels at their own depth: ``I;16`` as uint16, ``F`` as float32; modes
    without a numpy layout of their own (palette, CMYK, YCbCr, ...) through RGB or RGBA."""
    mode = image.mode
    if mode.startswith("I;16"):
        return np.asarray(image).astype(np.uint16)  # any byte order -> native
    if mode in ("L", "LA", "RGB", "RGBA", "I", "F"):
        return np.array(image)  # a copy: torch wants writable memory
    if mode == "1":
        return np.array(image.convert("L"))
    keeps_alpha = mode in ("PA", "RGBa", "La") or "transparency" in image.info
    return np.array(image.convert("RGBA" if keeps_alpha else "RGB"))


def _tensor_pixels(tensor: Any, what: str) -> np.ndarray:
    """A tensor (C, H, W) with C of 1, 3 or 4, or (H, W), as numpy channels last."""
    import torch

    if tensor.ndim == 3 and tensor.shape[0] in (1, 3, 4):
        tensor = tensor.permute(1, 2, 0)
    elif tensor.ndim != 2:
        raise UserError(f"{what}: a tensor image must be (3, H, W), (4, H, W), (1, H, W) or "
                        f"(H, W), got {tuple(tensor.shape)} (a batch? give a list)")
    tensor = tensor.detach().cpu()
    if tensor.dtype in (torch.float16, torch.bfloat16):
        tensor = tensor.float()  # numpy has no bfloat16
    return tensor.contiguous().numpy()


def _as_uint8(array: np.ndarray, what: str) -> np.ndarray:
    """The values of ``array`` read as a file's pixels are (module docstring), as uint8."""
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (1, 2, 3, 4)):
        raise UserError(f"{what}: an image array must be (H, W) grey or (H, W, 3) RGB (or with "
                        f"alpha: (H, W, 2), (H, W, 4)), got shape {array.shape}")
    height, width = array.shape[:2]
    if height == 0 or width == 0:
        raise UserError(f"{what} is empty ({width}x{height} pixels)")
    if height * width > max_pixels():
        raise UserError(f"{what}: {width}x{height} pixels, more than SODKIT_MAX_PIXELS "
                        f"({max_pixels()}) allows for one image")
    kind = array.dtype.kind
    if array.dtype == np.uint8:
        return array if array.flags.writeable else array.copy()
    if array.dtype == np.uint16:
        return (array >> 8).astype(np.uint8)  # as a 16-bit file is read (imageio._to_uint8)
    if kind in "iu":
        low, high = int(array.min()), int(array.max())
        if low < 0 or high > 255:
            raise UserError(f"{what}: {array.dtype} values from {low} to {high}; give 8-bit "
                            f"values (0-255) as uint8, or 16-bit ones as uint16")
        return array.astype(np.uint8)
    if kind == "f":
        return _float_levels(array, what)
    raise UserError(f"{what}: {array.dtype} pixels are no image; give uint8 (0-255), uint16, or "
                    f"floats in [0, 1]")


def _float_levels(array: np.ndarray, what: str) -> np.ndarray:
    if not np.isfinite(array).all():
        raise UserError(f"{what} holds NaN or infinite values; it would be read as black")
    low, high = float(array.min()), float(array.max())
    if low < -_FLOAT_SLACK or high > 1 + _FLOAT_SLACK:
        hint = " (0-255 values? divide by 255, or give uint8)" if high > 1 else ""
        raise UserError(f"{what}: float values from {low:g} to {high:g}; a float image is read "
                        f"on the 0-1 scale{hint}")
    scaled = np.clip(array.astype(np.float32) * np.float32(255), 0, 255)
    return np.round(scaled).astype(np.uint8)


def _rgb_alpha(array: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """uint8 channels-last pixels as RGB and alpha (None without one)."""
    if array.ndim == 2 or array.shape[2] == 1:
        grey = array.reshape(array.shape[:2])
        return cv2.cvtColor(np.ascontiguousarray(grey), cv2.COLOR_GRAY2RGB), None
    if array.shape[2] == 2:
        grey = np.ascontiguousarray(array[:, :, 0])
        return cv2.cvtColor(grey, cv2.COLOR_GRAY2RGB), array[:, :, 1].copy()
    alpha = array[:, :, 3].copy() if array.shape[2] == 4 else None
    return np.ascontiguousarray(array[:, :, :3]), alpha


def mask_of(item: Any, shape: tuple[int, int], what: str = "mask") -> np.ndarray:
    """A mask computed before (``model.predict``'s map, a saved mask, ...) as float32 (H, W) in
    [0, 1], at the image's ``shape``: floats on the 0-1 scale, uint8 / 255, uint16 / 65535
    (``--save soft``), booleans as 0 / 1; a path or bytes read as ``sodkit eval`` reads masks;
    colour only where its channels agree."""
    if isinstance(item, (str, Path)) or is_bytes(item):
        from .imageio import read_mask

        if not is_bytes(item) and not Path(item).is_file():
            raise UserError(f"{what} not found: {item}")
        grey = _from_bytes(item, what, read_mask) if is_bytes(item) else read_mask(item)
        prob = grey.astype(np.float32) / np.float32(255)
    else:
        prob = _probabilities(_one_channel(_pixels(item, what), what), what)
    if prob.shape != tuple(shape):
        raise UserError(f"{what} is {prob.shape[1]}x{prob.shape[0]} pixels, its image "
                        f"{shape[1]}x{shape[0]}; give the mask of this image")
    return prob


def _one_channel(array: np.ndarray, what: str) -> np.ndarray:
    if array.ndim == 3 and array.shape[2] == 1:
        return array[:, :, 0]
    if array.ndim == 3 and array.shape[2] in (3, 4):
        if not (np.array_equal(array[:, :, 0], array[:, :, 1])
                and np.array_equal(array[:, :, 0], array[:, :, 2])):
            raise UserError(f"{what}: a mask has one channel; this one's colour channels "
                            f"differ (an image given as the mask?)")
        return array[:, :, 0]
    if array.ndim != 2:
        raise UserError(f"{what}: a mask must be (H, W), got shape {array.shape}")
    return array


def _probabilities(array: np.ndarray, what: str) -> np.ndarray:
    if array.size == 0:
        raise UserError(f"{what} is empty ({array.shape[1]}x{array.shape[0]} pixels)")
    if array.dtype == np.bool_:
        return array.astype(np.float32)
    if array.dtype == np.uint16:
        return array.astype(np.float32) / np.float32(65535)
    if array.dtype.kind in "iu":
        return _as_uint8(array, what).astype(np.float32) / np.float32(255)
    if array.dtype.kind != "f":
        raise UserError(f"{what}: {array.dtype} is no mask; give floats in [0, 1] or uint8")
    if not np.isfinite(array).all():
        raise UserError(f"{what} holds NaN or infinite values")
    low, high = float(array.min()), float(array.max())
    if low < -_FLOAT_SLACK or high > 1 + _FLOAT_SLACK:
        raise UserError(f"{what}: float values from {low:g} to {high:g}; a float mask is a "
                        f"probability in [0, 1] (0-255 values? divide by 255, or give uint8)")
    return np.clip(array.astype(np.float32), 0, 1)


def background_input(value: Any) -> Any:
    """``cutout(background=...)``: an image in memory (PIL, array of 2 or more dimensions,
    tensor, bytes) through :func:`image_of`, anything else through
    :func:`sodkit.inference.render.background_of` (None, a colour, ``blur``, an image file)."""
    from .inference.render import background_of

    module = type(value).__module__
    in_memory = (is_bytes(value) or module.startswith(("PIL.", "torch"))
                 or (isinstance(value, np.ndarray) and value.ndim >= 2))
    if in_memory:
        return image_of(value, "background")[0]
    return background_of(value, "background")
