"""Networks, one file per method, picked by ``model.name``; every module is imported here so that
registration never depends on import order."""

from . import fpn
from .base import NETWORKS, build_network

__all__ = ["NETWORKS", "build_network", "fpn"]
