"""Requests that arrive together share one forward pass; a bounded number are let in at all.

Two bounds hold the server's memory whatever the load (rembg #752: memory that grew under
sustained load):

* :class:`Admission`: at most ``capacity`` requests are inside the server at once, from the
  moment their headers arrive (before their body is read) until their answer is sent. The next
  one is answered at once with 503 and a ``Retry-After``, its body unread. So at most
  ``capacity`` bodies, decoded images and outputs exist at any time, and the batch queue below
  can never hold more than ``capacity`` items.
* :class:`Batcher`: one worker thread takes the queued inputs, up to ``max_batch`` at a time,
  waiting at most ``max_wait_s`` after the oldest one arrived for others to join it, and runs
  them through one forward pass. The event loop only waits on a future; it never runs a
  forward. Under load the queue fills while a forward runs, so the next batch is full without
  any wait; the wait only matters when requests trickle in.

Nothing here knows about images or HTTP: the forward is a callable from a list of inputs to a
list of results, so the tests and the benchmark measure the same object the server uses.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


class Busy(Exception):
    """The server holds as many requests as it may: answer 503 with ``Retry-After``."""


class Admission:
    """A count of the requests inside the server, bounded by ``capacity``."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._inside = 0
        self._lock = threading.Lock()

    @property
    def inside(self) -> int:
        return self._inside

    def enter(self) -> None:
        """Let one request in, or raise :class:`Busy`."""
        with self._lock:
            if self._inside >= self.capacity:
                raise Busy()
            self._inside += 1

    def leave(self) -> None:
        with self._lock:
            self._inside -= 1


@dataclass
class _Item:
    value: Any
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    arrived: float


@dataclass
class BatchStats:
    """What the worker has done since it started (``GET /health``)."""

    batches: int = 0
    items: int = 0
    largest: int = 0
    busy_s: float = 0.0  # time spent in forward passes

    def as_dict(self) -> dict[str, Any]:
        return {"batches": self.batches, "images": self.items, "largest_batch": self.largest,
                "mean_batch": round(self.items / self.batches, 2) if self.batches else None}


class Batcher:
    """One worker thread that runs ``forward(list of inputs) -> list of results`` on batches of
    the inputs submitted by :meth:`submit`, at most ``max_batch`` at a time."""

    def __init__(self, forward: Callable[[list[Any]], Sequence[Any]], max_batch: int,
                 max_wait_s: float, name: str = "sodkit-serve-forward") -> None:
        if max_batch < 1 or max_wait_s < 0:
            raise ValueError("max_batch must be >= 1 and max_wait_s >= 0")
        self.forward, self.max_batch, self.max_wait_s = forward, max_batch, max_wait_s
        self.stats = BatchStats()
        self._queue: collections.deque[_Item] = collections.deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def submit(self, value: Any) -> Any:
        """The forward's result for ``value``, computed in a batch with whatever else waits."""
        loop = asyncio.get_running_loop()
        item = _Item(value, loop.create_future(), loop, time.monotonic())
        with self._ready:
            if self._stopping:
                raise RuntimeError("the batcher has stopped")
            self._queue.append(item)
            self._ready.notify()
        return await item.future

    def stop(self, timeout: float | None = None) -> None:
        """Finish what is queued, then end the worker thread."""
        with self._ready:
            self._stopping = True
            self._ready.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _next_batch(self) -> list[_Item] | None:
        """The next batch (None: stopped and nothing left): the oldest item, and those that
        arrive until it has waited ``max_wait_s`` or the batch is full."""
        with self._ready:
            while not self._queue:
                if self._stopping:
                    return None
                self._ready.wait()
            batch = [self._queue.popleft()]
            deadline = batch[0].arrived + self.max_wait_s
            while len(batch) < self.max_batch:
                if self._queue:
                    batch.append(self._queue.popleft())
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping:
                    break
                self._ready.wait(left)
            return batch

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._run(batch)
            del batch  # its inputs go with their requests while the worker waits for more

    def _run(self, batch: list[_Item]) -> None:
        started = time.monotonic()
        try:
            results = list(self.forward([item.value for item in batch]))
            if len(results) != len(batch):
                raise RuntimeError(f"forward gave {len(results)} results for {len(batch)}")
        except Exception as exc:  # each waiting request gets the error
            for item in batch:
                _settle(item, error=exc)
        else:
            for item, result in zip(batch, results, strict=True):
                _settle(item, result=result)
        finally:
            self.stats.busy_s += time.monotonic() - started
            self.stats.batches += 1
            self.stats.items += len(batch)
            self.stats.largest = max(self.stats.largest, len(batch))


def _settle(item: _Item, result: Any = None, error: BaseException | None = None) -> None:
    """Hand a result (or an error) to the request waiting on the event loop's side."""
    def done() -> None:
        if item.future.done():  # the client went away meanwhile
            return
        if error is not None:
            item.future.set_exception(error)
        else:
            item.future.set_result(result)

    try:
        item.loop.call_soon_threadsafe(done)
    except RuntimeError:  # the loop has closed: nobody waits any more
        pass
