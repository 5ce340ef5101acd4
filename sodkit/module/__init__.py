"""Reusable network blocks shared by the networks in :mod:`sodkit.network` (no registry)."""

from .conv import ConvBNAct, resize_to
from .sync_bn import AllReduceBatchNorm, convert_allreduce_batchnorm, freeze_batchnorm

__all__ = ["AllReduceBatchNorm", "ConvBNAct", "convert_allreduce_batchnorm", "freeze_batchnorm",
           "resize_to"]
