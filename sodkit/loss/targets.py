"""Which loss terms suit soft targets (alpha mattes), and why.

Every term accepts a target in [0, 1] and is defined on it. The question is what it trains a
soft pixel towards: a term whose per-pixel optimum is the target itself (``p = t``) trains soft
edges as soft; a ratio of sums (IoU, Dice, CEL) is minimised, for a soft ``t``, by pushing
``p`` towards 1 where ``t`` is above a level set by the whole map and towards 0 below it, so it
sharpens what a matte leaves soft. BiRefNet's Matting task keeps only the first kind: its
config.py sets ``'iou': 0.5 * 0`` (config.py:126) where every other task trains IoU, and
weights BCE, MAE and SSIM (config.py:125, 128, 132).

``SOFT_TARGETS[name] = (exact, why)``: ``exact`` when the term's gradient vanishes at ``p = t``
for any soft ``t`` (tests/test_soft_masks.py checks it for each).
"""

from __future__ import annotations

SOFT_TARGETS: dict[str, tuple[bool, str]] = {
    "bce": (True, "the cross-entropy of Bernoulli(t): minimised exactly at p = t"),
    "wbce": (True, "per-pixel BCE with weights that depend on the target only: minimised "
                   "at p = t"),
    "mae": (True, "|p - t| is 0 at p = t"),
    "ssim": (True, "SSIM(p, t) is 1 at p = t (means, variances and covariance agree)"),
    "iou": (False, "1 - sum(p t) / sum(p + t - p t) is defined for soft t, but it is lowest "
                   "for p near 0 or 1: it makes soft edges hard"),
    "dice": (False, "a ratio of sums like IoU: sharpens soft targets"),
    "cel": (False, "(sum(p + t) - 2 sum(p t)) / sum(p + t): a ratio of sums, sharpens soft "
                   "targets"),
    "wiou": (False, "IoU with boundary weights: sharpens soft targets"),
    "structure": (False, "BCE plus the weighted IoU: its IoU half sharpens soft targets"),
}
