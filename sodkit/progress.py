"""Progress of long work: say first what will be done, then how far it is, until it is done.

Every command that can run longer than a few seconds uses :class:`Progress` (#33): on a
terminal, a tqdm bar on stderr with the count, the rate and the ETA, kept moving by a small
thread while one item takes long (its elapsed time goes on); elsewhere (a CI log, ``nohup``,
a scheduler's output file) a log line at most every ``SODKIT_PROGRESS_S`` seconds (default 5;
``0``: a line per item), also while one item takes long, and, with ``summary``, a last line
with the total time (else the caller says what was done and how long it took). Rates below
one item per second are given as seconds per item (``4.2 s/img``, not ``0.2 img/s`` or
``0.0 img/s``): :func:`format_rate`. One interface, ``Progress(total, desc, unit, enabled)``,
a context manager with ``update(n)``, for eval, test, ``sodkit predict`` (``early``: its first
rate after the first batch), downloads (``scale``: megabytes; ``initial``: a resumed file),
export and info.

Light imports only (no torch, no numpy): ``sodkit eval`` runs without torch.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from types import TracebackType
from typing import Any

from .errors import UserError
from .text import noun_for

ENV = "SODKIT_PROGRESS_S"  # seconds between progress lines when stderr is not a terminal
DEFAULT_INTERVAL_S = 5.0
_REFRESH_S = 1.0  # a terminal bar's elapsed time and ETA move on at least this often

logger = logging.getLogger(__name__)


def interval_s() -> float:
    """``SODKIT_PROGRESS_S``: seconds between progress lines in a log (0: one per item)."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise UserError(f"{ENV}={text!r}: seconds between progress lines, a number >= 0 (0: a "
                        f"line per item), e.g. {ENV}=30")
    return value


def format_duration(seconds: float) -> str:
    """``0:01:05`` (hours not bounded); ``?`` for an unknown time."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def format_rate(per_second: float, unit: str, many: str | None = None) -> str:
    """``12.3 img/s``; below one per second ``4.2 s/img`` (a slow rate printed as ``0.0 img/s``
    said nothing); ``? img/s`` before anything was measured. ``many``: the unit's plural
    (``12.3 images/s``, ``4.2 s/image``)."""
    many = many or unit
    if not math.isfinite(per_second) or per_second <= 0:
        return f"? {many}/s"
    if per_second >= 1:
        return f"{per_second:.1f} {many}/s"
    return f"{1 / per_second:.1f} s/{unit}"


def is_terminal() -> bool:
    """stderr is a terminal with a size. On a pseudo-terminal without one (``script`` in a CI
    job, a container's ``-t`` without a window size: 0 columns or 0 lines) tqdm drew its bar as
    nothing at all: it gets the log lines."""
    if not sys.stderr.isatty():
        return False
    try:
        size = os.get_terminal_size(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return size.columns > 0 and size.lines > 0


class Progress:
    """``total`` items of work called ``desc`` (``None``: a count without an end); a context
    manager. ``unit``: what an item is (``img``, ``stage``, ``resamples``: a plural is kept).
    ``enabled=False`` (ranks other than 0, a nested step) shows nothing; ``terminal``: a bar
    (True) or log lines (False), default whether stderr is a terminal; ``summary``: a last
    line with the count and the time when the work ends; ``early``: in a log, a line after the
    first update too (the first rate and ETA come at once, when an item takes a minute).
    ``scale``: counts are said divided by it, with one decimal, in ``unit`` (no plural): bytes
    as megabytes with ``unit="MB", scale=1e6``; ``initial``: done before this start (a
    download resumed), counted but not in the rate."""

    def __init__(self, total: int | None, desc: str, unit: str = "it", enabled: bool = True,
                 log: logging.Logger | None = None, terminal: bool | None = None,
                 summary: bool = False, early: bool = False, scale: float = 1.0,
                 initial: int = 0) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.summary = summary  # a last line with the count and the time
        self._early = early  # a line after the first update is due (then every interval)
        self.scale, self.initial = scale, initial
        self.count = initial
        self.enabled = enabled
        self.log = log or logger
        self.interval = interval_s()
        self.start = self._last_line = time.monotonic()
        self.postfix = ""
        self._bar: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if not enabled:
            return
        if is_terminal() if terminal is None else terminal:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True,
                             initial=initial, unit_scale=1 / scale if scale != 1 else False,
                             leave=False, file=sys.stderr)
        if self._bar is not None or self.interval > 0:
            self._thread = threading.Thread(target=self._tick, name="sodkit-progress",
                                            daemon=True)
            self._thread.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(done=kind is None)

    def update(self, n: int = 1, postfix: str = "") -> None:
        """``n`` more items done; ``postfix``: a few words on the latest (shown with the count)."""
        if not self.enabled:
            return
        with self._lock:
            if self.total is not None:  # the last batch of a shard may count past the end
                n = max(0, min(n, self.total - self.count))
            self.count += n
            if postfix:
                self.postfix = postfix
            if self._bar is not None:
                if postfix:
                    self._bar.set_postfix_str(postfix, refresh=False)
                self._bar.update(n)
            elif self._early or time.monotonic() - self._last_line >= self.interval:
                self._early = False
                self._line()

    def doing(self, what: str) -> None:
        """Say what is running now (shown with the count; on a terminal at once)."""
        if not self.enabled:
            return
        with self._lock:
            self.postfix = what
            if self._bar is not None:
                self._bar.set_postfix_str(what, refresh=True)

    def seconds(self) -> float:
        """Seconds since the work started."""
        return time.monotonic() - self.start

    def rate(self) -> float:
        """Items per second since the start."""
        return (self.count - self.initial) / max(time.monotonic() - self.start, 1e-9)

    def _one(self) -> str:
        if self.scale != 1:  # a unit of measure: MB
            return self.unit
        return self.unit.removesuffix("s") if self.unit.endswith("s") else self.unit

    def _many(self) -> str:
        if self.scale != 1 or self.unit.endswith("s"):
            return self.unit
        return noun_for(2, self.unit)

    def _units(self, count: int) -> str:
        return self.unit if count == 1 else self._many()

    def _amount(self, count: int) -> str:
        return str(count) if self.scale == 1 else f"{count / self.scale:.1f}"

    def _rate(self) -> str:
        return format_rate(self.rate() / self.scale, self._one(), self._many())

    def status(self) -> str:
        """``desc: 12/40 img (30%), 2.5 img/s, eta 0:00:11, <postfix>`` as a log line says it."""
        elapsed = time.monotonic() - self.start
        if self.total:
            done = (f"{self._amount(self.count)}/{self._amount(self.total)} "
                    f"{self._units(self.total)} ({100 * self.count / self.total:.0f}%)")
        else:
            done = f"{self._amount(self.count)} {self._units(self.count)}"
        parts = [done]
        if self.count > self.initial:
            parts.append(self._rate())
            if self.total:
                parts.append(f"eta {format_duration((self.total - self.count) / self.rate())}")
        parts.append(f"{format_duration(elapsed)} so far")
        if self.postfix:
            parts.append(self.postfix)
        return f"{self.desc}: {', '.join(parts)}"

    def _line(self) -> None:
        self._last_line = time.monotonic()
        self.log.info("%s", self.status())

    def _tick(self) -> None:
        """A terminal bar's clock moves on; a log gets a line while one item takes long."""
        wait = _REFRESH_S if self._bar is not None else max(self.interval, 0.05)
        while not self._stop.wait(wait):
            with self._lock:
                if self._stop.is_set():
                    return
                if self._bar is not None:
                    self._bar.refresh()
                elif time.monotonic() - self._last_line >= self.interval:
                    self._line()

    def close(self, done: bool = True) -> None:
        """End the display; ``done``: a last line with the count and the time it took."""
        if not self.enabled or self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _REFRESH_S)
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            if done and self.summary:
                elapsed = time.monotonic() - self.start
                rate = f", {self._rate()}" if self.count > self.initial else ""
                self.log.info("%s: done, %s %s in %s%s", self.desc, self._amount(self.count),
                              self._units(self.count), format_duration(elapsed), rate)
