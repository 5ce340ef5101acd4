"""A real headless Chromium driven over the DevTools protocol, for tests of ``report.html``
and of ``sodkit serve``'s page.

Chromium is started by the test with ``--remote-debugging-pipe``: commands go in on file
descriptor 3 and answers come out on 4, as NUL-terminated JSON, so no port, no websocket
library and no network are needed. The page's console errors, uncaught exceptions and failed
loads are collected from the ``Runtime`` and ``Log`` domains.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The first Chromium-like browser on PATH (``$SODKIT_CHROMIUM`` wins)."""
    explicit = os.environ.get("SODKIT_CHROMIUM")
    if explicit:
        return explicit
    return next((path for path in map(shutil.which, NAMES) if path), None)


class Browser:
    """One headless browser with one page (a flattened session)."""

    def __init__(self, executable: str, profile: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        cmd_read, self._cmd = os.pipe()
        self._resp, resp_write = os.pipe()
        # above 4, so that dup2 onto 3 and 4 in the child never meets itself (dup2(fd, fd)
        # would keep the close-on-exec flag) nor clobbers the other end
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (cmd_read, resp_write)]
        os.close(cmd_read)
        os.close(resp_write)

        def wire() -> None:  # in the child: fd 3 = commands, fd 4 = answers
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        args = [executable, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--remote-debugging-pipe", f"--user-data-dir={profile}", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions", "about:blank"]
        self.process = subprocess.Popen(args, preexec_fn=wire, close_fds=False,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in high:
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._resp], [], [], left)[0]:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self._resp, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: bool = False) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self._cmd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The next event ``method`` of the page (earlier ones already seen count)."""
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()}, session=True)
        self.wait_for("Page.loadEventFired")

    def open_url(self, url: str) -> None:
        """Open a page served over HTTP (``sodkit serve``'s) and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        self.wait_for("Page.loadEventFired")

    def set_files(self, selector: str, paths: list[Path]) -> None:
        """Choose ``paths`` in the file input ``selector``, as a user does in the file dialog
        (the page gets its ``change`` event)."""
        root = self.call("DOM.getDocument", session=True)["root"]["nodeId"]
        node = self.call("DOM.querySelector", {"nodeId": root, "selector": selector},
                         session=True)["nodeId"]
        self.call("DOM.setFileInputFiles", {"nodeId": node,
                                            "files": [str(p.resolve()) for p in paths]},
                  session=True)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (pressed + released) in the middle of the element."""
        box = self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
                            "e.scrollIntoView(); const r = e.getBoundingClientRect();"
                            "return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1],
                                                   "button": "left", "clickCount": 1},
                      session=True)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(json.dumps(params["exceptionDetails"])[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error",
                                                                                  "assert"):
                found.append(json.dumps(params.get("args"))[:500])
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", "")[:500])
        return found

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._cmd)
        os.close(self._resp)
