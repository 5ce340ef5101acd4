"""A real ``sodkit serve`` process on 127.0.0.1, and plain HTTP to it (standard library only).

The server is started with ``--port 0`` and says its address in its first line; a request can
be held half sent (its headers and part of its body), so that a test knows a request is inside
the server (``GET /health`` counts it) without racing it.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from tests import processes

ADDRESS = re.compile(r"^serving .* on http://127\.0\.0\.1:(\d+)/")


class Server:
    """``python -m sodkit serve --checkpoint CHECKPOINT --port 0 ARGS`` and its log lines."""

    def __init__(self, checkpoint: Path, *args: str, env: dict[str, str] | None = None,
                 cwd: Path | None = None, token: str | None = None) -> None:
        cmd = [sys.executable, "-m", "sodkit", "serve", "--checkpoint", str(checkpoint),
               "--port", "0", *args]
        self.token = token
        self.proc = processes.start(cmd, env={**os.environ, **(env or {})}, cwd=cwd,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = self._wait_for_address()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def _wait_for_address(self) -> int:
        dog, seen = processes.Watchdog([self.proc], tail=self.lines), 0
        while True:
            for line in self.lines[seen:]:
                found = ADDRESS.match(line)
                if found:
                    return int(found.group(1))
            if len(self.lines) != seen:
                seen = len(self.lines)
                dog.progressed()
            if self.proc.poll() is not None:
                self._reader.join()
                raise AssertionError("sodkit serve ended before serving:\n" +
                                     "\n".join(self.lines))
            dog.check()
            time.sleep(processes.POLL_S)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, token: bool = True
                ) -> tuple[int, dict[str, str], bytes]:
        sent = dict(headers or {})
        if token and self.token:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def post(self, body: bytes, content_type: str = "image/jpeg", query: str = "",
             **kwargs) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": content_type, **kwargs.pop("headers", {})}
        return self.request("POST", f"/predict{query}", body, headers, **kwargs)

    def health(self) -> dict:
        status, _, body = self.request("GET", "/health")
        assert status == 200, body
        return json.loads(body)

    def hold(self, body: bytes, content_type: str = "image/jpeg") -> socket.socket:
        """A POST /predict whose headers and first half of the body are sent; the rest is
        sent by :func:`finish`."""
        sock = socket.create_connection(("127.0.0.1", self.port))
        auth = f"Authorization: Bearer {self.token}\r\n" if self.token else ""
        head = (f"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
                f"{auth}Content-Length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head + body[: len(body) // 2])
        return sock

    def wait_inside(self, count: int) -> None:
        """Until ``GET /health`` counts ``count`` requests inside (held ones reached it)."""
        dog = processes.Watchdog([self.proc], tail=self.lines)
        while self.health()["inside"] != count:
            dog.check()
            time.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM, then the exit code (a hang fails the test)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = processes.wait(self.proc, output=lambda: len(self.lines))[0]
        self._reader.join()
        return code

    def kill(self) -> None:
        processes.kill([self.proc])
        self._reader.join()


def finish(sock: socket.socket, body: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send the rest of a :meth:`Server.hold` request; its answer."""
    with sock:
        sock.sendall(body[len(body) // 2:])
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, dict(response.getheaders()), response.read()


def form(image: bytes, fields: dict[str, str] | None = None, name: str = "image",
         filename: str = "photo.jpg") -> tuple[bytes, str]:
    """A multipart/form-data body with the file field ``name`` and text ``fields``."""
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'
             .encode() for key, value in (fields or {}).items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
                 f'filename="{filename}"\r\nContent-Type: image/jpeg\r\n\r\n'.encode()
                 + image + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), \
        f"multipart/form-data; boundary={boundary}"
