"""Inference preprocessing (``data.preprocess``): how an image becomes the network's input at
test and predict time, when it must be the way some other code did it.

Published weights were measured through their authors' own inference code, and a network is
only as good as the input statistics it was trained and tested on: to give the published masks,
an imported model must see the images as the authors' code showed them. Each pipeline here is
the image -> tensor half; :mod:`sodkit.engine.postprocess` holds the matching network output ->
mask half, chosen by the transform's ``preprocess`` name, so that a data loader, ``sodkit
predict`` and the Python API need nothing but the transform to follow a model's pipeline.

- ``sodkit`` (``null``): :class:`~sodkit.data.transforms.TestTransform`, exactly as always.
- ``minet``: lartpang/MINet ``code/tools/inference.py``: PIL bilinear resize of the RGB image
  (PIL antialiases when it shrinks), ``ToTensor`` and ``Normalize`` with ``data.mean`` /
  ``data.std`` (ImageNet's in its recipe), in float32.
- ``f3net``: weijun88/F3Net ``src/dataset.py`` (test mode): the image as float32 RGB minus the
  mean, over the std (its 0-255 statistics: ``data.mean`` / ``data.std`` x 255), in float64,
  then OpenCV's bilinear resize of that float image (no antialiasing), then float32.
- ``birefnet``: ZhengPeng7/BiRefNet ``inference.py`` through its ``dataset.py`` /
  ``utils.path_to_image``: OpenCV's bilinear resize of the uint8 image (no antialiasing),
  ``ToTensor`` and ``Normalize`` with ``data.mean`` / ``data.std`` (ImageNet's in its recipe).
- ``birefnet-card``: the Hugging Face model card's snippet (``ZhengPeng7/BiRefNet``):
  torchvision's ``Resize`` of the PIL image (PIL bilinear, antialiased), the same
  normalisation. The same weights give slightly different masks through the two.
"""

from __future__ import annotations

import typing
from collections.abc import Callable

import cv2
import numpy as np
import torch

from ..config.schema import DataCfg, Preprocess
from ..errors import ConfigError

PREPROCESSING: tuple[str, ...] = typing.get_args(Preprocess)  # checked by the config loader too


def preprocess_name(cfg: DataCfg) -> str:
    """``data.preprocess`` checked, ``null`` read as ``sodkit``."""
    name = cfg.preprocess or "sodkit"
    if name not in PREPROCESSING:
        raise ConfigError(f"data.preprocess: unknown inference pipeline {name!r} (known: "
                          f"{', '.join(PREPROCESSING)}; null: the checkpoint's own, else "
                          f"sodkit)")
    return name


class MINetTransform:
    """uint8 RGB (H, W, 3) -> float32 (3, S, S) as MINet's ``InferImageSet`` makes it."""

    preprocess = "minet"

    def __init__(self, cfg: DataCfg, size: int) -> None:
        self.size, self.mean, self.std = size, list(cfg.mean), list(cfg.std)

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        from PIL import Image
        from torchvision.transforms import functional as TF  # the v1 functions MINet calls

        resized = Image.fromarray(image).resize((self.size, self.size), Image.BILINEAR)
        return TF.normalize(TF.to_tensor(resized), self.mean, self.std)


class BiRefNetCardTransform(MINetTransform):
    """uint8 RGB (H, W, 3) -> float32 (3, S, S) as BiRefNet's model card makes it: the same
    calls as MINet's (``Resize`` of a PIL image is PIL's bilinear resize)."""

    preprocess = "birefnet-card"


class BiRefNetTransform(MINetTransform):
    """uint8 RGB (H, W, 3) -> float32 (3, S, S) as BiRefNet's test ``MyData`` makes it."""

    preprocess = "birefnet"

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        from torchvision.transforms import functional as TF

        resized = cv2.resize(image, dsize=(self.size, self.size), interpolation=cv2.INTER_LINEAR)
        return TF.normalize(TF.to_tensor(resized), self.mean, self.std)


class F3NetTransform:
    """uint8 RGB (H, W, 3) -> float32 (3, S, S) as F3Net's test ``Data`` makes it."""

    preprocess = "f3net"

    def __init__(self, cfg: DataCfg, size: int) -> None:
        self.size = size
        self.mean = np.asarray(cfg.mean, dtype=np.float64).reshape(1, 1, 3) * 255.0
        self.std = np.asarray(cfg.std, dtype=np.float64).reshape(1, 1, 3) * 255.0

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        normalised = (image.astype(np.float32) - self.mean) / self.std  # float64, as numpy does
        resized = cv2.resize(normalised, dsize=(self.size, self.size),
                             interpolation=cv2.INTER_LINEAR)
        return torch.from_numpy(resized).permute(2, 0, 1).float().contiguous()


AUTHORS: dict[str, Callable[[DataCfg, int], Callable[[np.ndarray], torch.Tensor]]] = {
    "minet": MINetTransform, "f3net": F3NetTransform, "birefnet": BiRefNetTransform,
    "birefnet-card": BiRefNetCardTransform}
