"""Reusable network blocks shared by the networks in :mod:`sodkit.network` (no registry)."""

from .cfm import CFM
from .conv import ConvBNAct, pool_to, resize_to
from .grad_checkpoint import checkpoint_blocks, checkpoint_segment, frozen_batchnorm_stats
from .interaction import AIM, SIM, AIMLevel
from .sync_bn import AllReduceBatchNorm, convert_allreduce_batchnorm, freeze_batchnorm

__all__ = ["AIM", "CFM", "SIM", "AIMLevel", "AllReduceBatchNorm", "ConvBNAct",
           "checkpoint_blocks", "checkpoint_segment", "convert_allreduce_batchnorm",
           "freeze_batchnorm", "frozen_batchnorm_stats", "pool_to", "resize_to"]
