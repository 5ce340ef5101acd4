"""Imports without the cyclic garbage collector, for a ``sodkit`` process: 20-30% faster starts.

Importing torch, torchvision and timm makes about 670,000 objects, and the collector, started
every 700 new objects, walked the ever larger heap again and again on the way: a ``sodkit
train`` process took 4.2-4.9 s of CPU to import what it runs, 3.2-3.7 s with the collector off
(measured here, Python 3.11). Module code makes next to no cyclic garbage, so while an import
statement runs the collector is off; when an outermost import made many objects (a heavy
library), everything alive is moved out of the collector's reach (``gc.freeze``): module
objects live as long as the process, and the next passes would only walk them again.

Installed by :func:`sodkit.cli.console_main` only, in a process that ends with its command: a
heavy import late in a run (matplotlib for the final report) also freezes what is alive then,
which then stays in memory until the process exits instead of being collected should it become
garbage. Tests and notebooks that call :func:`sodkit.cli.main` keep the collector as it is.
"""

from __future__ import annotations

import builtins
import gc
import threading
from typing import Any

HEAVY = 50_000  # new objects an import must leave in the youngest generation to be frozen

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_original = builtins.__import__


def _import(*args: Any, **kwargs: Any) -> Any:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        return _original(*args, **kwargs)
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                if gc.get_count()[0] >= HEAVY:
                    gc.freeze()
                gc.enable()


def install() -> None:
    """Run every import statement of this process with the collector off (see the module)."""
    builtins.__import__ = _import
