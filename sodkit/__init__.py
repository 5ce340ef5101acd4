"""sodkit: train, evaluate and run salient object detection models."""

import os as _os
import sys as _sys

__version__ = "0.2.0"


def _quiet_opencv() -> None:
    """No OpenCV log line reaches the user (#28): a file it cannot decode is sodkit's to
    report, in one line naming it, not OpenCV's ``[ WARN:0@11.467] global grfmt_png.cpp:793
    ...``. The one place that sets it, on import of sodkit: through the environment for an
    OpenCV imported later (loader workers inherit it), directly for one already imported.
    ``OPENCV_LOG_LEVEL=INFO`` (or any level) set by the user is kept."""
    _os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    cv2 = _sys.modules.get("cv2")
    logging = getattr(getattr(cv2, "utils", None), "logging", None)
    if logging is not None and _os.environ["OPENCV_LOG_LEVEL"] == "ERROR":
        logging.setLogLevel(logging.LOG_LEVEL_ERROR)


_quiet_opencv()
