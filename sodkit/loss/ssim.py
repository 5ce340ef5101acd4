"""SSIM loss ``1 - SSIM(sigmoid(logits), target)`` (as in BASNet's hybrid loss).

Local means, variances and covariance come from a Gaussian window (zero padded, output at the
input's size); SSIM is averaged per image, then over the batch. The window is a buffer, so it
follows the criterion's ``.to(device)``; it is also cast to the input's device and dtype on use.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .terms import LOSSES, as_float

C1 = 0.01**2  # stabilisers for a dynamic range of 1 (probabilities)
C2 = 0.03**2


def gaussian_window(size: int, sigma: float) -> Tensor:
    """(1, 1, size, size) normalised Gaussian; size must be odd (the window is centred)."""
    if size < 1 or size % 2 == 0:
        raise ValueError(f"window must be an odd number >= 1, got {size}")
    x = torch.arange(size, dtype=torch.float64) - size // 2
    g = torch.exp(-(x**2) / (2.0 * sigma**2))
    g = g / g.sum()
    return torch.outer(g, g)[None, None]


@LOSSES.register("ssim")
class SSIMLoss(nn.Module):
    """``1 - mean SSIM`` between the probability map and the mask."""

    def __init__(self, window: int = 11, sigma: float = 1.5) -> None:
        super().__init__()
        self.register_buffer("window", gaussian_window(window, sigma).float(), persistent=False)

    def _blur(self, x: Tensor) -> Tensor:
        window = self.window.to(device=x.device, dtype=x.dtype)
        return F.conv2d(x, window, padding=window.shape[-1] // 2)

    def forward(self, logits: Tensor, target: Tensor) -> Tensor:
        logits, target = as_float(logits, target)
        # convolutions under autocast would run in half precision: sums of squares need float32
        with torch.autocast(logits.device.type, enabled=False):
            return self._loss(logits, target)

    def _loss(self, logits: Tensor, target: Tensor) -> Tensor:
        p = torch.sigmoid(logits)
        mu_p, mu_t = self._blur(p), self._blur(target)
        var_p = self._blur(p * p) - mu_p**2
        var_t = self._blur(target * target) - mu_t**2
        cov = self._blur(p * target) - mu_p * mu_t
        ssim = ((2 * mu_p * mu_t + C1) * (2 * cov + C2)) / (
            (mu_p**2 + mu_t**2 + C1) * (var_p + var_t + C2))
        return (1.0 - ssim.flatten(1).mean(1)).mean()
