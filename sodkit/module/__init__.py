"""Reusable network blocks shared by the networks in :mod:`sodkit.network` (no registry)."""

from .checkpoint import checkpoint_blocks, checkpoint_segment, frozen_batchnorm_stats
from .conv import ConvBNAct, resize_to

__all__ = ["ConvBNAct", "checkpoint_blocks", "checkpoint_segment", "frozen_batchnorm_stats",
           "resize_to"]
