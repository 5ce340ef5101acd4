"""Joint image/mask transforms on ``torchvision.transforms.v2``.

The image travels as a ``tv_tensors.Image`` (uint8 until the end: the fast resize path) and the
mask as a :class:`SoftMask`, so every random geometric transform draws its parameters once and
applies them to both. ``SoftMask`` is a ``tv_tensors.Mask`` (float in [0, 1]) whose resize and
rotation are bilinear: torchvision forces nearest-neighbour on masks, which would make the soft
label edges jagged and up to half a pixel off the image's anti-aliased edges. Transforms without
a SoftMask kernel fall back to the Mask kernels, so alignment holds for any geometric op added
later. Colour jitter and normalisation only touch images by construction.

Train and test resize the same way (bilinear, antialiased), so a network sees the same input
statistics in both: the test side is :class:`sodkit.inference.preprocess.TestTransform`,
whose array -> tensor step and normalisation these transforms share.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

from ..config.schema import DataCfg
from ..inference.preprocess import image_to_tensor, normalisation
from .augment import color_enhance, pepper

BILINEAR = InterpolationMode.BILINEAR


class SoftMask(tv_tensors.Mask):
    """A float mask in [0, 1] that is resized and rotated bilinearly (soft training labels)."""


@F.register_kernel(F.resize, SoftMask)
def _resize_soft(mask: torch.Tensor, size: list[int] | None, interpolation=BILINEAR,
                 max_size: int | None = None, antialias: bool = True, **_: object) -> SoftMask:
    out = F.resize_image(mask.as_subclass(torch.Tensor), size, interpolation=BILINEAR,
                         max_size=max_size, antialias=True)
    return tv_tensors.wrap(out, like=mask)


@F.register_kernel(F.rotate, SoftMask)
def _rotate_soft(mask: torch.Tensor, angle: float, interpolation=BILINEAR, expand: bool = False,
                 center: list[float] | None = None, fill: object = None, **_: object
                 ) -> SoftMask:
    out = F.rotate_image(mask.as_subclass(torch.Tensor), angle, interpolation=BILINEAR,
                         expand=expand, center=center, fill=[0.0])
    return tv_tensors.wrap(out, like=mask)


def mask_to_tensor(mask: np.ndarray) -> SoftMask:
    """uint8 or uint16 (a 16-bit alpha matte) (H, W) numpy -> float32 SoftMask (1, H, W) in
    [0, 1]: the soft values kept at the file's precision."""
    if mask.dtype == np.uint16:
        return SoftMask(torch.from_numpy(mask.astype(np.float32) / np.float32(65535))
                        .unsqueeze(0))
    return SoftMask(torch.from_numpy(np.ascontiguousarray(mask)).unsqueeze(0).float() / 255.0)


class TrainTransform:
    """Random joint augmentation; the output side is chosen per call (multi-scale training).

    Called with uint8 ``image`` (H, W, 3), uint8 ``mask`` (H, W) and ``size`` (a side, or
    (height, width)); returns the normalised float32 image (3, h, w) and the soft float32 mask
    (1, h, w) in [0, 1]. Order: crop, resize, flip, rotation, colour jitter, colour enhance,
    pepper (BiRefNet's: flip, rotate, enhance, pepper).
    The randomness comes from torch's global generator (seeded per sample by the dataset).
    """

    def __init__(self, cfg: DataCfg) -> None:
        steps: list[Callable] = []
        if cfg.hflip > 0:
            steps.append(v2.RandomHorizontalFlip(p=cfg.hflip))
        if cfg.rotation > 0 and cfg.rotation_p > 0:
            rotate = v2.RandomRotation(cfg.rotation, interpolation=BILINEAR, fill=0)
            steps.append(rotate if cfg.rotation_p >= 1 else v2.RandomApply([rotate],
                                                                          p=cfg.rotation_p))
        if cfg.color_jitter > 0:
            j = cfg.color_jitter
            steps.append(v2.ColorJitter(brightness=j, contrast=j, saturation=j))
        self.augment = v2.Compose(steps) if steps else v2.Identity()
        self.finish = normalisation(cfg)
        self.crop, self.binarize = cfg.crop, cfg.binarize
        self.enhance, self.pepper = cfg.color_enhance, cfg.pepper

    def __call__(self, image: np.ndarray, mask: np.ndarray, size: int | tuple[int, int]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.crop > 0:
            image, mask = random_crop(image, mask, self.crop)
        img, msk = image_to_tensor(image), mask_to_tensor(mask)
        hw = [size, size] if isinstance(size, int) else [int(size[0]), int(size[1])]
        img = F.resize(img, hw, interpolation=BILINEAR, antialias=True)
        msk = F.resize(msk, hw, interpolation=BILINEAR, antialias=True)
        img, msk = self.augment(img, msk)
        if self.enhance:  # image only, after the geometry (BiRefNet's preproc order)
            img = color_enhance(img)
        if self.pepper > 0:
            img = pepper(img, self.pepper)
        img = self.finish(img)
        msk = msk.as_subclass(torch.Tensor).clamp_(0.0, 1.0)
        if self.binarize is not None:
            msk = (msk >= self.binarize).float()
        return img.as_subclass(torch.Tensor), msk


def random_crop(image: np.ndarray, mask: np.ndarray, fraction: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """F3Net's crop: each side loses ``cut`` pixels, ``cut`` uniform in [0, fraction x side),
    at a uniform offset in [0, cut). Views, no copy; drawn from torch's global generator."""
    height, width = mask.shape[:2]
    cut_h = _draw(int(height * fraction))
    cut_w = _draw(int(width * fraction))
    top, left = _draw(cut_h), _draw(cut_w)
    rows, cols = slice(top, height - cut_h + top), slice(left, width - cut_w + left)
    return image[rows, cols], mask[rows, cols]


def _draw(bound: int) -> int:
    """Uniform integer in [0, bound), 0 when bound <= 0."""
    return int(torch.randint(bound, ()).item()) if bound > 0 else 0


def build_train_transform(cfg: DataCfg) -> TrainTransform:
    return TrainTransform(cfg)
