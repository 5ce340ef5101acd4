"""Progress of long work: a bar on a terminal, a line every few seconds in a log.

A command that can run for more than a few seconds says first what it will do, then shows
how far it is: on a terminal a tqdm bar with the rate and the time left; without one (a CI
log, ``nohup``, a cluster's job log) a plain log line every :func:`interval_s` seconds
(``SODKIT_PROGRESS_S``, default 5; 0: a line per item), so a log never goes silent for minutes.
The caller logs what was done, and how long it took, at the end. Light imports (tqdm only on a
terminal).

(Its interface, ``Progress(total, desc, unit, enabled)`` as a context manager with
``update(n)``, and its setting are those of the progress display built for the other long
commands at the same time, so that one module can serve all.)
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from .errors import UserError

logger = logging.getLogger(__name__)

ENV = "SODKIT_PROGRESS_S"  # seconds between progress lines when stderr is not a terminal
DEFAULT_INTERVAL_S = 5.0


def interval_s() -> float:
    """Seconds between two progress lines in a log (``SODKIT_PROGRESS_S``; 0: every item)."""
    text = os.environ.get(ENV)
    if text is None:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 86400:  # NaN fails too
        raise UserError(f"{ENV}={text!r}: seconds between progress lines, a number >= 0 "
                        f"(0: a line per item), e.g. {ENV}=5")
    return value


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """``total`` units of work named ``what`` (``ECSSD``, ``bootstrap``), counted in ``unit``.

    Args:
        enabled: False shows nothing (another rank's share, a nested step).
        terminal: a bar (True) or log lines (False); default: whether stderr is a terminal.
    """

    def __init__(self, total: int, what: str, unit: str = "img", enabled: bool = True,
                 terminal: bool | None = None) -> None:
        self.total, self.what, self.unit = total, what, unit
        self.done = 0
        self.start = self._last = time.perf_counter()
        self._every = interval_s()
        self._bar: Any = None
        self._lines = enabled and not (sys.stderr.isatty() if terminal is None else terminal)
        if enabled and not self._lines:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit=unit, dynamic_ncols=True,
                             leave=False)

    def update(self, count: int = 1) -> None:
        self.done += count
        if self._bar is not None:
            self._bar.update(count)
            return
        now = time.perf_counter()
        if self._lines and now - self._last >= self._every and self.done < self.total:
            self._last = now
            rate = self.done / max(now - self.start, 1e-9)
            left = (self.total - self.done) / rate if rate > 0 else float("nan")
            speed = (f"{rate:.1f} {self.unit}/s" if rate >= 1
                     else f"{1 / rate:.1f} s/{self.unit}" if rate > 0 else "")
            logger.info("%s: %d/%d %s, %s, eta %s", self.what, self.done, self.total,
                        self.unit, speed, _clock(left) if left == left else "?")

    def seconds(self) -> float:
        """Seconds since the work started."""
        return time.perf_counter() - self.start

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
