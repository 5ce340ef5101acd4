"""sodkit's cache folder: the demo data and the models fetched by name live there.

``$SODKIT_CACHE`` when set; else the platform's user cache folder (``$XDG_CACHE_HOME`` or
``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) with
``sodkit`` under it. Light: no imports beyond the standard library (``sodkit models`` lists
what is cached without torch).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV = "SODKIT_CACHE"


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    given = os.environ.get(ENV)
    if given:
        return Path(given).expanduser()
    if sys.platform == "darwin":
        base = Path("~/Library/Caches").expanduser()
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or "~/AppData/Local").expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser()
    return base / "sodkit"
