"""BiRefNet's gradient reference supervision (``loss.gradient_weight``).

With ``out_ref``, each of the three coarser decoder levels predicts a gradient map (logits at its
own size); its target is the image's 5x5 Laplacian times that level's side logits, at the image
size (the network's ``gradient`` and ``gradient_target`` outputs). BiRefNet's train.py
(``_train_batch``) upsamples each prediction to its target's size (bilinear, aligned corners)
and sums over the levels ``BCELoss(sigmoid(prediction), sigmoid(target))``; the target is not
detached, so the loss also trains the side heads. Here the same value comes from
``binary_cross_entropy_with_logits`` (stable where the original's ``BCELoss`` clamps its logs at
-100), which is differentiable in its target too.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def gradient_reference_loss(predictions: list[Tensor], targets: list[Tensor]) -> Tensor:
    """Sum over levels of the mean BCE between each level's gradient logits (upsampled to the
    target's size) and the sigmoid of its target logits, in float32 at least."""
    if len(predictions) != len(targets) or not predictions:
        raise ValueError(f"{len(predictions)} gradient predictions for {len(targets)} targets")
    losses = []
    for pred, target in zip(predictions, targets, strict=True):
        dtype = torch.promote_types(torch.promote_types(pred.dtype, target.dtype), torch.float32)
        pred, target = pred.to(dtype), target.to(dtype)
        if pred.shape[-2:] != target.shape[-2:]:
            pred = F.interpolate(pred, size=target.shape[-2:], mode="bilinear", align_corners=True)
        losses.append(F.binary_cross_entropy_with_logits(pred, torch.sigmoid(target)))
    return torch.stack(losses).sum()
