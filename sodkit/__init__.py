"""sodkit: train, evaluate and run salient object detection models.

``sodkit.load(path)`` gives a :class:`~sodkit.api.Model` (see :mod:`sodkit.api`). The API is
imported on first use, so ``import sodkit`` stays cheap: torch loads only when a model does.
"""

from __future__ import annotations

import os as _os
import sys as _sys
from typing import TYPE_CHECKING, Any

from .version import __version__


def _quiet_opencv() -> None:
    """No OpenCV log line reaches the user (#28): a file it cannot decode is sodkit's to
    report, in one line naming it, not OpenCV's ``[ WARN:0@11.467] global grfmt_png.cpp:793
    ...``. The one place that sets it, on import of sodkit: through the environment for an
    OpenCV imported later (loader workers inherit it), directly for one already imported.
    ``OPENCV_LOG_LEVEL=INFO`` (or any level) set by the user is kept. FFmpeg's own lines
    (``[mov,mp4,... @ 0x55..] moov atom not found`` for a video it cannot read) are silenced
    the same way, through ``OPENCV_FFMPEG_LOGLEVEL`` (-8: AV_LOG_QUIET), read when OpenCV
    first opens a video."""
    _os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    _os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    cv2 = _sys.modules.get("cv2")
    logging = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging is not None and _os.environ["OPENCV_LOG_LEVEL"] == "ERROR":
        logging.setLogLevel(logging.LOG_LEVEL_ERROR)


_quiet_opencv()

__all__ = ["Model", "__version__", "cutout", "load"]

if TYPE_CHECKING:
    from .api import Model, load
    from .inference.render import cutout


def __getattr__(name: str) -> Any:
    if name in ("load", "Model"):
        from . import api

        return getattr(api, name)
    if name == "cutout":  # an image and its probability map -> the cut-out, no model (no torch)
        from .inference.render import cutout

        return cutout
    raise AttributeError(f"module 'sodkit' has no attribute {name!r}")
