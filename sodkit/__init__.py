"""sodkit: train, evaluate and run salient object detection models.

``sodkit.load(path)`` gives a :class:`~sodkit.api.Model` (see :mod:`sodkit.api`). The API is
imported on first use, so ``import sodkit`` stays cheap: torch loads only when a model does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"
__all__ = ["Model", "__version__", "load"]

if TYPE_CHECKING:
    from .api import Model, load


def __getattr__(name: str) -> Any:
    if name in ("load", "Model"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'sodkit' has no attribute {name!r}")
