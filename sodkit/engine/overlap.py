"""Each batch's output work beside the next batch's forward pass (``sodkit predict``, #23).

After a batch's forward pass, every image's probabilities are resized back to the image's own
size, quantised, encoded as a PNG and written with its record: a few milliseconds per image that
``sodkit predict`` used to spend between two forward passes. Here one thread does that work while
the main thread runs the next forward pass; the operations it spends its time in (torch's
interpolation, OpenCV's PNG encoder, file writes) release the GIL.

- At most ``depth`` batches wait for the thread (their tensors stay in memory until then), so
  a thread slower than the forward passes holds the loop back instead of piling up memory.
- The thread runs the jobs in order, one at a time: the files are written in the order they
  always were, by one writer.
- Under torchrun, :meth:`MaskWriter.send <sodkit.engine.rounds.MaskWriter.send>` is a
  collective: the thread only encodes, and the main thread sends each round's files, in round
  order on every rank, ``depth`` rounds later. One process: the thread writes too.
- A job's error is raised in the main thread at the next :meth:`OutputThread.put` or at
  :meth:`OutputThread.close`. When the loop fails (an unreadable image, NaN probabilities),
  one process still writes the batches already handed over, as it did when it wrote each batch
  before the next; under torchrun the rounds not yet sent are dropped (sending them would be a
  collective that a failed rank never joins).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from .rounds import MaskWriter
from .runtime import Runtime

Files = list[tuple[Path, bytes]]


class OutputThread:
    """Runs ``make_files`` jobs (one per round) in one thread and sends their files in order.

    Use as a context manager: on leaving, every job handed over is finished and its files
    sent; on leaving with an error, the files of the jobs already handed over are still
    written, and the loop's error is the one raised.
    """

    def __init__(self, writer: MaskWriter, runtime: Runtime, depth: int = 2) -> None:
        self.writer, self.depth = writer, depth
        self.local = runtime.world_size == 1  # no collective: the thread may send
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="sodkit-masks")
        self.pending: deque[Future] = deque()

    def put(self, make_files: Callable[[], Files]) -> None:
        """Hand over one round's output work (every rank once per round, in the same order)."""
        job = (lambda: self.writer.send(make_files())) if self.local else make_files
        self.pending.append(self.pool.submit(job))
        while len(self.pending) > self.depth:
            self._retire()

    def _retire(self) -> None:
        files = self.pending.popleft().result()  # the job's own error, raised here
        if not self.local:
            self.writer.send(files)

    def close(self) -> None:
        """Wait for every job and send its files."""
        try:
            while self.pending:
                self._retire()
        finally:
            self.pool.shutdown(wait=True)

    def __enter__(self) -> OutputThread:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.close()
            return
        if self.local:  # already sending in the thread: let those jobs finish, then fail
            self.pool.shutdown(wait=True)
        else:  # a collective now could wait for a rank that failed: hand nothing more over
            self.pool.shutdown(wait=True, cancel_futures=True)
