"""Inference preprocessing, the input side of each pipeline (``data.preprocess``): how an image
becomes the network's input at test and predict time (uint8 RGB (H, W, 3) -> float32 (3, S, S)),
sodkit's own or the way some other code did it.

Published weights were measured through their authors' own inference code, and a network is
only as good as the input statistics it was trained and tested on: to give the published masks,
an imported model must see the images as the authors' code showed them. Each class here is
the image -> tensor half of a pipeline; :mod:`sodkit.inference.postprocess` holds the network
output -> mask halves, and :mod:`sodkit.inference.pipelines` pairs them by name. A transform
carries its ``preprocess`` name, so that a data loader, ``sodkit predict`` and the Python API
need nothing but the transform to follow a model's pipeline.

- ``sodkit`` (``null``): :class:`TestTransform`: resized as training resizes (bilinear,
  antialiased: :mod:`sodkit.data.transforms` takes :func:`image_to_tensor` and
  :func:`normalisation` from here), so a network sees the same input statistics in both.
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

import cv2
import numpy as np
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from ..config.schema import DataCfg

BILINEAR = InterpolationMode.BILINEAR


def image_to_tensor(image: np.ndarray) -> tv_tensors.Image:
    """uint8 RGB (H, W, 3) numpy -> uint8 ``tv_tensors.Image`` (3, H, W), no copy."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected a uint8 (H, W, 3) RGB array, got {image.dtype} {image.shape}")
    return tv_tensors.Image(torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1))


def normalisation(cfg: DataCfg) -> v2.Compose:
    """uint8 -> float32 in [0, 1], then ``data.mean`` / ``data.std`` (training's last step too)."""
    return v2.Compose([v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(mean=list(cfg.mean), std=list(cfg.std))])


class TestTransform:
    """Resize to a square side and normalise: uint8 RGB (H, W, 3) -> float32 (3, S, S)."""

    preprocess = "sodkit"  # its inference pipeline

    def __init__(self, cfg: DataCfg, size: int) -> None:
        self.size = size
        self.finish = normalisation(cfg)

    def __call__(self, image: np.ndarray) -> torch.Tensor:
        img = F.resize(image_to_tensor(image), [self.size, self.size], interpolation=BILINEAR,
                       antialias=True)
        return self.finish(img).as_subclass(torch.Tensor)


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
