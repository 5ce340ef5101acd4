"""One file over HTTP(S) into a ``.part`` file, resumed where it stopped, bounded in size.

The standard library's urllib: redirects are followed to http(s) only (a release URL
redirects to a CDN), ``Range: bytes=N-`` continues a partial file, with ``If-Range`` and the
validator (ETag, else Last-Modified) of the response that started it, so a file that changed on
the server restarts from zero instead of being spliced. A connection that drops mid-way is
resumed a few times within the call, and a process that was killed resumes on its next call.
The bytes taken never exceed the expected size (or, with none, ``SODKIT_MAX_FILE_MB``).

Progress: :class:`sodkit.progress.Progress` in megabytes (a tqdm bar on a terminal, else a
log line every ``SODKIT_PROGRESS_S`` seconds, default 5). Light: no torch.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..progress import Progress

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
TIMEOUT_S = 60.0
RETRIES = 4  # resumptions of a dropped connection within one call
_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_DROPPED = (http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError,
            socket.timeout, TimeoutError)


class NetworkError(UserError):
    """The server could not be reached or kept dropping the connection (the caller says where
    to put the file by hand)."""


class _HttpOnly(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        if not newurl.lower().startswith(("http://", "https://")):
            raise UserError(f"{req.full_url} redirects to {newurl!r}, which is not http(s); "
                            f"refused")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpOnly)


def _validator_file(part: Path) -> Path:
    return part.with_name(part.name + ".validator")


def _request(url: str, offset: int, validator: str | None) -> urllib.request.Request:
    from .. import __version__

    headers = {"User-Agent": f"sodkit/{__version__}", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    return urllib.request.Request(url, headers=headers)


def _total(response: Any, offset: int) -> tuple[int, int | None]:
    """(where the body starts, the whole file's size or None) from the response's headers."""
    if response.status == 206:
        match = _RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if match is None or int(match.group(1)) != offset:
            return -1, None  # not the range asked for: start again
        return offset, None if match.group(3) == "*" else int(match.group(3))
    length = response.headers.get("Content-Length")
    return 0, int(length) if length and length.isdigit() else None


def _check_total(total: int | None, expected: int | None, cap: int, url: str) -> None:
    if total is not None and expected is not None and total != expected:
        raise UserError(f"{url} serves {total} bytes; the catalogue says {expected}: not the "
                        f"file it names (a changed release, or a mirror's error page); nothing "
                        f"was kept")
    if total is not None and total > cap:
        raise UserError(f"{url} serves {total / 2**20:.0f} MiB, more than the "
                        f"{cap / 2**20:.0f} MiB sodkit takes for a file without a known size "
                        f"(SODKIT_MAX_FILE_MB raises it); nothing was kept")


def _refused(url: str, exc: urllib.error.HTTPError) -> UserError:
    why = " (not found: the release moved, or SODKIT_MIRROR lacks it)" if exc.code == 404 else ""
    return UserError(f"{url}: the server answered {exc.code} {exc.reason}{why}")


def _attempt(url: str, part: Path, expected: int | None, limit: int, label: str) -> None:
    """One request, appended to ``part``; raises a _DROPPED error when the connection ends
    early."""
    offset = part.stat().st_size if part.exists() else 0
    validator_file = _validator_file(part)
    validator = validator_file.read_text().strip() if validator_file.exists() else None
    try:
        response = _OPENER.open(_request(url, offset, validator), timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # nothing after offset: the file changed, or is whole
            discard(part)
            raise ConnectionError("range not satisfiable: starting again") from None
        if exc.code >= 500:  # the server's trouble, maybe passing: as an unreachable one
            raise NetworkError(f"{url}: the server answered {exc.code} {exc.reason}") from None
        raise _refused(url, exc) from None
    cap = expected if expected is not None else limit
    with response:
        start, total = _total(response, offset)
        if start < 0:  # a range other than the one asked for
            discard(part)
            raise ConnectionError("the server sent another range: starting again")
        if start == 0:  # a whole file (the first request, or the server ignored the range)
            offset = 0
            tag = response.headers.get("ETag") or response.headers.get("Last-Modified")
            validator_file.write_text(tag or "")
        _check_total(total, expected, cap, url)
        progress = Progress(total or expected, label, unit="MB", log=logger, scale=1e6,
                            initial=offset)
        done = offset
        try:
            with open(part, "r+b" if offset else "wb") as out:
                out.seek(offset)
                out.truncate()
                while block := response.read(CHUNK):
                    done += len(block)
                    if done > cap:
                        raise UserError(f"{url} sent more than {cap} bytes; nothing was kept")
                    out.write(block)
                    progress.update(len(block))
        finally:
            progress.close()
    if total is not None and done < total:
        raise http.client.IncompleteRead(b"", total - done)


def download(url: str, part: Path, expected: int | None, limit: int, label: str) -> Path:
    """``url`` into ``part`` (continued from its current length), at most ``limit`` bytes.

    Raises:
        NetworkError: no connection, or it dropped more than :data:`RETRIES` times.
        UserError: the server refused (4xx/5xx) or served another size than ``expected``.
    """
    for attempt in range(RETRIES + 1):
        try:
            _attempt(url, part, expected, limit, label)
            return part
        except urllib.error.URLError as exc:  # before any byte: refused, no route, DNS
            reason = getattr(exc, "reason", exc)
            raise NetworkError(f"cannot reach {url} ({reason})") from None
        except NetworkError:
            raise
        except UserError:  # refused, or not the file: nothing of it is kept
            discard(part)
            raise
        except _DROPPED as exc:
            held = part.stat().st_size if part.exists() else 0
            if attempt == RETRIES:
                raise NetworkError(f"the connection to {url} dropped {attempt + 1} times "
                                   f"({type(exc).__name__}); {held} bytes kept, continued on "
                                   f"the next run") from None
            logger.info("%s: the connection dropped after %.1f MB (%s); continuing from there",
                        label, held / 1e6, type(exc).__name__)
            time.sleep(0.5 * attempt)
    return part


def discard(part: Path) -> None:
    """Remove a partial download and its validator."""
    for path in (part, _validator_file(part)):
        path.unlink(missing_ok=True)
