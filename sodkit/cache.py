"""sodkit's cache folder: the demo data and the models fetched by name live there.

``$SODKIT_CACHE`` when set; else the platform's user cache folder (``$XDG_CACHE_HOME`` or
``~/.cache`` on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) with
``sodkit`` under it. Light: no imports beyond the standard library (``sodkit models`` lists
what is cached without torch).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

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


def read_cache_json(path: Path, max_bytes: int) -> dict[str, Any]:
    """The JSON object a cache file holds, or ``{}`` when it is missing, larger than
    ``max_bytes``, not UTF-8 JSON or not an object: a cache file is a hint written by an
    earlier run (or by anyone who can write the folder), never a reason to fail."""
    try:
        if path.stat().st_size > max_bytes:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}
