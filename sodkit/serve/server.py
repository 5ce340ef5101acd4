"""Running the application under uvicorn: the socket, the logs, and a stop that drains.

* The listening socket is bound here, before uvicorn starts, so that a port in use or an
  unknown host is sodkit's one-line error (uvicorn would log it and exit on its own).
* uvicorn's own log lines (its start banner, its access log, a warning per malformed request)
  do not reach the terminal: its loggers keep only errors, passed on as one line of
  ``sodkit.serve``; the application logs one line per request itself (:mod:`.app`).
* SIGTERM (and Ctrl-C): uvicorn stops accepting connections, lets the requests in flight
  finish (for at most ``drain_s``), then runs the application's shutdown (the batching worker
  ends after its last batch). uvicorn then raises the signal again for the default handler,
  which would end the process by the signal: the handler installed here takes it instead, so
  a drained SIGTERM is a normal end (exit 0).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from typing import Any

from ..errors import UserError

logger = logging.getLogger("sodkit.serve")
QUIETED = ("uvicorn", "python_multipart")
BACKLOG = 128


class _OneLine(logging.Handler):
    """A library's error as one line of sodkit's log; its other records are dropped."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.ERROR:
            return
        message = record.getMessage().splitlines()[0] if record.getMessage() else ""
        exc = record.exc_info[1] if record.exc_info else None
        logger.error("%s%s", message, f": {type(exc).__name__}: {exc}" if exc else "")


def quiet_libraries() -> None:
    for name in QUIETED:
        library = logging.getLogger(name)
        library.handlers = [_OneLine()]
        library.propagate = False


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one) and listening."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise UserError(f"--host {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose "
                        f"another --port (0: any free one)") from None
    return sock


def address_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


@contextlib.contextmanager
def _sigterm_ends_normally() -> Iterator[list[int]]:
    taken: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: taken.append(sig))
    try:
        yield taken
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_server(app: Any, sock: socket.socket, drain_s: float) -> bool:
    """Serve ``app`` on ``sock`` until SIGTERM or Ctrl-C; True when a SIGTERM ended it."""
    import uvicorn

    quiet_libraries()
    config = uvicorn.Config(app, http="h11", loop="asyncio", ws="none", lifespan="on",
                            log_config=None, access_log=False, server_header=False,
                            timeout_graceful_shutdown=drain_s)
    server = uvicorn.Server(config)
    with _sigterm_ends_normally() as taken, sock:
        server.run(sockets=[sock])
    return bool(taken)
