"""Reusable network blocks shared by the networks in :mod:`sodkit.network` (no registry)."""

from .conv import ConvBNAct, resize_to

__all__ = ["ConvBNAct", "resize_to"]
