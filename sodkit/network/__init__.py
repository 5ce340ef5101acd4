"""Networks, one file per method, picked by ``model.name``; every module is imported here so that
registration never depends on import order."""

from . import birefnet, f3net, fpn, minet
from .base import NETWORKS, build_network

__all__ = ["NETWORKS", "birefnet", "build_network", "f3net", "fpn", "minet"]
