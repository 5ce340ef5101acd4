"""Image-only training augmentations of BiRefNet (``image_proc.py``: ``color_enhance``,
``random_pepper``), on uint8 ``tv_tensors.Image`` (3, H, W). The mask is never touched: they
change pixel values, not geometry. Random draws come from torch's global generator, which the
training dataset seeds per sample.

- :func:`color_enhance` (``data.color_enhance``): PIL's ``ImageEnhance`` Brightness, Contrast,
  Color and Sharpness in that order, factors drawn as the original draws them (integers / 10:
  0.5-1.5, 0.5-1.5, 0-2, 0-3). torchvision's ``adjust_*`` are the same blends as PIL's; one
  detail differs: PIL's contrast blends with the grey image's mean rounded to an integer, ours
  with the exact mean (at most half a grey level apart).
- :func:`pepper` (``data.pepper``): ``int(fraction * H * W)`` pixels drawn (with repetition)
  and set to black or white on every channel.
"""

from __future__ import annotations

import torch
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F

# (adjustment, lowest factor x 10, highest factor x 10): image_proc.py color_enhance
ENHANCE = ((F.adjust_brightness, 5, 15), (F.adjust_contrast, 5, 15),
           (F.adjust_saturation, 0, 20), (F.adjust_sharpness, 0, 30))


def _factor(low: int, high: int) -> float:
    """``random.randint(low, high) / 10``: both ends included."""
    return int(torch.randint(low, high + 1, ()).item()) / 10.0


def color_enhance(image: tv_tensors.Image) -> tv_tensors.Image:
    """Brightness, contrast, colour and sharpness, each by a random factor (see module)."""
    for adjust, low, high in ENHANCE:
        image = adjust(image, _factor(low, high))
    return image


def pepper(image: tv_tensors.Image, fraction: float) -> tv_tensors.Image:
    """``int(fraction * H * W)`` random pixels become black or white (all channels)."""
    height, width = image.shape[-2:]
    count = int(fraction * height * width)
    if count == 0:
        return image
    rows = torch.randint(height, (count,))
    cols = torch.randint(width, (count,))
    values = (torch.randint(2, (count,)) * 255).to(image.dtype)
    out = image.clone()
    out[..., rows, cols] = values.expand(out.shape[0], count)
    return tv_tensors.wrap(out, like=image)
