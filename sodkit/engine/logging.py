"""Rank-0 output: the text log, the progress display and TensorBoard.

Other ranks get a logger that only shows errors (they print nothing unless they fail), no
progress bar and no writer, so that a ``torchrun`` job prints one stream. The progress display
is a tqdm bar on a terminal and plain periodic log lines otherwise (CI logs, ``nohup``,
cluster schedulers), as users expect.

Only sodkit's own loggers reach the terminal (:func:`keep_libraries_quiet`, set up by
``sodkit.cli.main`` for every command and by ``setup_logging``): other libraries log into the
root logger too (fontTools prints 59 INFO lines per PDF that matplotlib writes), and Python
warnings (torch's FutureWarnings) are routed into logging and held there. A run's log file
keeps the other libraries' warnings and errors, for the record.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..progress import is_terminal

if TYPE_CHECKING:
    import numpy as np

_FORMAT = "%(asctime)s %(levelname)s %(message)s"


OWN = "sodkit"  # the logger every module's ``logging.getLogger(__name__)`` lies under


def is_own(record: logging.LogRecord) -> bool:
    """Whether ``record`` comes from sodkit's own code (not another library's logger, nor a
    Python warning routed into logging)."""
    return record.name == OWN or record.name.startswith(OWN + ".")


def _for_the_log_file(record: logging.LogRecord) -> bool:
    """sodkit's lines, and what other libraries warn about (for the record, not the terminal)."""
    return is_own(record) or record.levelno >= logging.WARNING


def _consoles() -> list[logging.Handler]:
    """The root handlers that write to the terminal (not a file, not a test's capture)."""
    streams = {id(s) for s in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)}
    return [h for h in logging.getLogger().handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
            and id(getattr(h, "stream", None)) in streams]


def keep_libraries_quiet() -> None:
    """No line of another library's logging, and no Python warning, reaches the terminal: the
    console handlers pass sodkit's own records only, and warnings go into logging (where the
    console drops them and a run's log file keeps them). Idempotent; every command runs it."""
    logging.captureWarnings(True)
    for console in _consoles():
        if is_own not in console.filters:
            console.addFilter(is_own)


def quiet_worker_process() -> None:
    """The same in a worker process that did not inherit the command's handlers (a fork
    server's child): warnings into logging, and only sodkit's records on stderr."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    keep_libraries_quiet()


def setup_logging(log_file: Path | None, is_main: bool) -> None:
    """Attach the run's ``train.log`` handler once (rank 0); quieten other ranks."""
    root = logging.getLogger()
    if not is_main:  # rank 0 shows the job's warnings; the others speak only when they fail
        root.setLevel(logging.ERROR)
        logging.captureWarnings(True)
        return
    root.setLevel(logging.INFO)
    consoles = [h for h in root.handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    if not consoles:
        consoles = [logging.StreamHandler(sys.stderr)]
        consoles[0].setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(consoles[0])
    keep_libraries_quiet()
    for console in consoles:
        if _hide_progress_lines_on_terminal not in console.filters:
            console.addFilter(_hide_progress_lines_on_terminal)
    if log_file is not None:
        log_file = log_file.resolve()
        for handler in root.handlers:
            if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename) == log_file:
                return
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = _LogFile(log_file)
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler.addFilter(_for_the_log_file)
        root.addHandler(handler)


class _LogFile(logging.FileHandler):
    """``train.log`` / ``test.log``. A write that fails (a full disk) is one warning line on the
    console, once, instead of logging's traceback per record; the console keeps the log."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        if not self.failed:
            self.failed = True
            error = sys.exc_info()[1]
            reason = getattr(error, "strerror", None) or error
            sys.stderr.write(f"warning: cannot write {self.baseFilename}: {reason}; the log "
                             f"goes on on the console only\n")


def _hide_progress_lines_on_terminal(record: logging.LogRecord) -> bool:
    """Per-step lines (``extra={"progress": True}``) go to train.log; a terminal has the bar."""
    return not (getattr(record, "progress", False) and is_terminal())


def close_log_file(log_file: Path) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        is_file = isinstance(handler, logging.FileHandler)
        if is_file and Path(handler.baseFilename) == log_file.resolve():
            root.removeHandler(handler)
            handler.close()


def format_seconds(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class Progress:
    """One epoch's progress: a tqdm bar on a terminal (rank 0), else nothing (log lines instead)."""

    def __init__(self, total: int, desc: str, enabled: bool, initial: int = 0) -> None:
        self.bar = None
        if enabled and is_terminal():
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, dynamic_ncols=True, leave=False,
                            initial=initial)

    @property
    def interactive(self) -> bool:
        return self.bar is not None

    def update(self, postfix: dict[str, str] | None = None) -> None:
        if self.bar is not None:
            self.bar.update(1)
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Throughput:
    """Images per second over the last logging window and an ETA from the run's average."""

    def __init__(self, total_steps: int, done_steps: int) -> None:
        self.total_steps = total_steps
        self.start_steps = done_steps
        self.start = self.window_start = time.perf_counter()
        self.window_images = 0

    def add(self, images: int) -> None:
        self.window_images += images

    def images_per_second(self) -> float:
        now = time.perf_counter()
        rate = self.window_images / max(now - self.window_start, 1e-9)
        self.window_start, self.window_images = now, 0
        return rate

    def eta(self, done_steps: int) -> float:
        steps = done_steps - self.start_steps
        if steps <= 0:
            return float("nan")
        per_step = (time.perf_counter() - self.start) / steps
        return per_step * (self.total_steps - done_steps)


class TensorBoard:
    """A SummaryWriter on rank 0 and a no-op elsewhere, so call sites need no rank checks.

    A write that fails (a full disk, a file size limit) is one warning line, and the curves stop
    there: training goes on, and the next checkpoint that does not fit stops the run in one
    line (``sodkit.torchfile.save_atomic``). TensorBoard's writer thread re-raises such an error
    with a traceback of its own; :func:`_quiet_writer_threads` leaves it to the next call here.
    """

    def __init__(self, log_dir: Path | None, purge_step: int | None = None) -> None:
        """``purge_step``: a resumed run's first step; TensorBoard drops the events an
        interrupted run wrote from that step on, so curves have no duplicate points."""
        self.writer = None
        self.log_dir = log_dir
        if log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            _quiet_writer_threads()
            self.writer = SummaryWriter(str(log_dir), purge_step=purge_step)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> None:
        if self.writer is None:
            return
        try:
            getattr(self.writer, method)(*args, **kwargs)
        except OSError as exc:
            writer, self.writer = self.writer, None
            logging.getLogger(__name__).warning(
                "cannot write the TensorBoard events in %s: %s; the curves stop here",
                self.log_dir, exc.strerror or exc)
            with contextlib.suppress(Exception):
                writer.close()

    def scalars(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self._call("add_scalar", tag, value, step)

    def image(self, tag: str, image_hwc: np.ndarray, step: int) -> None:
        self._call("add_image", tag, image_hwc, step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        self._call("add_text", tag, text, step)

    def flush(self) -> None:
        self._call("flush")

    def close(self) -> None:
        self._call("close")
        self.writer = None


def _quiet_writer_threads() -> None:
    """Keep TensorBoard's writer thread from printing a traceback for an OSError: the writer
    raises it again at its next call, where :class:`TensorBoard` turns it into one line."""
    previous = threading.excepthook
    if getattr(previous, "sodkit_quiet", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        thread = type(args.thread).__name__ if args.thread is not None else ""
        if thread == "_AsyncWriterThread" and issubclass(args.exc_type, OSError):
            return
        previous(args)

    hook.sodkit_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def format_metrics(values: dict[str, Any]) -> str:
    return " ".join(
        f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items()
    )
