"""A real HTTP server on 127.0.0.1 for the download tests: files the test writes, served with
``Range`` / ``If-Range`` as a release host serves them, every request recorded, and a response
that can stop half-way (the connection closed) or trickle (so that two clients overlap).
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Served:
    """What the server did for one GET."""

    path: str
    range_start: int | None
    status: int
    sent: int


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)  # URL path -> content
    drop_at: dict[str, int] = field(default_factory=dict)  # path -> bytes sent, once, then cut
    delay_s: float = 0.0  # between 64 KiB blocks
    log: list[Served] = field(default_factory=list)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        """Stop serving and close the port (later connections are refused)."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        path = urlsplit(req.path).path
        data = self.files.get(path)
        if data is None:
            req.send_error(404)
            self.log.append(Served(path, None, 404, 0))
            return
        etag = '"' + hashlib.sha256(data).hexdigest()[:16] + '"'
        match = re.fullmatch(r"bytes=(\d+)-", req.headers.get("Range", ""))
        start = int(match.group(1)) if match else None
        if start is not None and req.headers.get("If-Range") not in (None, etag):
            start = None  # the file changed: the whole file
        if start is not None and start >= len(data):
            req.send_response(416)
            req.send_header("Content-Range", f"bytes */{len(data)}")
            req.end_headers()
            self.log.append(Served(path, start, 416, 0))
            return
        body = data[start or 0:]
        req.send_response(206 if start is not None else 200)
        if start is not None:
            req.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        req.send_header("Content-Length", str(len(body)))
        req.send_header("ETag", etag)
        req.send_header("Accept-Ranges", "bytes")
        req.end_headers()
        cut = self.drop_at.pop(path, None)
        sent = self._send(req, body if cut is None else body[:cut])
        self.log.append(Served(path, start, 206 if start is not None else 200, sent))
        if cut is not None:  # close mid-body: the client sees a short read
            req.close_connection = True
            req.connection.shutdown(socket.SHUT_RDWR)

    def _send(self, req: BaseHTTPRequestHandler, body: bytes) -> int:
        sent = 0
        try:
            for i in range(0, len(body), 1 << 16):
                req.wfile.write(body[i:i + (1 << 16)])
                sent += len(body[i:i + (1 << 16)])
                if self.delay_s:
                    time.sleep(self.delay_s)
            req.wfile.flush()
        except OSError:  # the client went away
            pass
        return sent

    def gets(self, path: str) -> list[Served]:
        return [s for s in self.log if s.path == path]
