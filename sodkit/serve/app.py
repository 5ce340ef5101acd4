"""The HTTP application (Starlette): the routes, the token, the bounds, one log line a request.

Routes:

* ``POST /predict``: the image (raw body or form field ``image``) -> ``image/png``, the file
  ``sodkit predict --save KIND`` writes (``?save=KIND``, default ``mask``; ``threshold``,
  ``background``, ``tint`` as predict's options); several kinds (``?save=mask,cutout``, one
  forward pass) -> JSON ``{"width", "height", "outputs": {kind: base64 PNG}}``;
* ``GET /health``: ``{"status": "ok", "token": needed or not, ...}`` with the batching counters;
* ``GET /info``: the model (name, file, provenance, licence where known) and the runtime;
* ``GET /``: the page (``page/``: plain HTML, CSS and JavaScript, no build step, no CDN).

Every refusal is a 4xx (or 503) with ``{"error": "one line"}``. With a token set, every route
but the page's files and ``/health`` needs ``Authorization: Bearer TOKEN`` (compared in
constant time). See :mod:`sodkit.serve.batching` for the bounds on memory.
"""

from __future__ import annotations

import base64
import hmac
import logging
import time
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

from .batching import Admission, Batcher, Busy
from .model import Outputs, ServedModel, outputs_of
from .settings import RETRY_AFTER_S, ServeSettings
from .upload import RequestError, read_body, upload_of

logger = logging.getLogger("sodkit.serve")

PAGE_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
              "/app.js": ("app.js", "text/javascript; charset=utf-8"),
              "/style.css": ("style.css", "text/css; charset=utf-8")}
OPEN_PATHS = frozenset([*PAGE_FILES, "/health"])  # no token needed: nothing of the model
OPTIONS = ("save", "threshold", "background", "tint")
PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: "
               "blob:; connect-src 'self' blob:; base-uri 'none'; form-action 'none'; "
               "frame-ancestors 'none'")


def create_app(served: ServedModel, settings: ServeSettings) -> Any:
    """The ASGI application serving ``served`` under ``settings``."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.routing import Route

    batcher = Batcher(served.forward, settings.max_batch, settings.max_wait_ms / 1000.0)
    admission = Admission(settings.capacity)
    counts = {"requests": 0}

    @asynccontextmanager
    async def lifespan(app: Any):
        batcher.start()
        yield
        batcher.stop()
        stats = batcher.stats
        logger.info("stopped after %d requests: %d images in %d forward passes (mean batch %s)",
                    counts["requests"], stats.items, stats.batches,
                    stats.as_dict()["mean_batch"] or "-")

    routes = [Route("/predict", _predict(served, batcher), methods=["POST"]),
              Route("/health", _health(batcher, admission, settings.token is not None),
                    methods=["GET"]),
              Route("/info", _info(served, settings), methods=["GET"]),
              *[Route(path, _page_file(*PAGE_FILES[path]), methods=["GET"])
                for path in PAGE_FILES]]
    middleware = [Middleware(AccessLog, counts=counts),
                  Middleware(Guard, token=settings.token, admission=admission)]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                     exception_handlers={HTTPException: _http_error})


def error(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": message}, status_code=status,
                        headers={"Cache-Control": "no-store", **(headers or {})})


async def _http_error(request: Any, exc: Any) -> Any:
    """Starlette's own refusals (404, 405) as one JSON line too."""
    reason = {404: f"no such route: {_printable(request.url.path)}",
              405: f"{request.method} is not allowed on {_printable(request.url.path)}"}
    return error(exc.status_code, reason.get(exc.status_code, str(exc.detail)),
                 dict(exc.headers or {}))


def _options(params: Any, where: str) -> dict[str, str]:
    unknown = [key for key in params if key not in OPTIONS]
    if unknown:
        raise RequestError(400, f"unknown {where} {_printable(unknown[0])!r}: known are "
                                f"{', '.join(OPTIONS)}")
    return {key: params[key] for key in params}


def _predict(served: ServedModel, batcher: Batcher) -> Any:
    from starlette.concurrency import run_in_threadpool

    async def predict(request: Any) -> Any:
        try:
            query = _options(request.query_params, "option")
            outputs_of(query)  # a bad option is refused before the body is read
            content_type = request.headers.get("content-type", "")
            body = await read_body(request.stream(), content_type,
                                   request.headers.get("content-length"))
            upload = upload_of(body, content_type)
            del body
            outputs = outputs_of({**query, **_options(upload.fields, "form field")})
            prepared = await run_in_threadpool(served.prepare, upload.data, outputs.needs_image)
            del upload
            scores = await batcher.submit(prepared.tensor)
            files = await run_in_threadpool(served.encode, prepared, scores, outputs)
        except RequestError as exc:
            request.state.note = exc.message
            return error(exc.status, exc.message, exc.headers)
        except Exception as exc:  # a bug, not the request: one line here, one in the log
            logger.error("POST /predict failed: %s: %s", type(exc).__name__, exc)
            return error(500, f"the server failed on this image ({type(exc).__name__}); its "
                              f"log says more")
        height, width = prepared.size
        request.state.note = f"{width}x{height} {','.join(files)}"
        return _answer(files, outputs, width, height)

    return predict


def _answer(files: dict[str, bytes], outputs: Outputs, width: int, height: int) -> Any:
    from starlette.responses import JSONResponse, Response

    headers = {"Cache-Control": "no-store"}
    if len(files) == 1:
        return Response(next(iter(files.values())), media_type="image/png", headers=headers)
    return JSONResponse({"width": width, "height": height,
                         "outputs": {kind: base64.b64encode(png).decode("ascii")
                                     for kind, png in files.items()}}, headers=headers)


def _health(batcher: Batcher, admission: Admission, token: bool) -> Any:
    from starlette.responses import JSONResponse

    async def health(request: Any) -> Any:
        return JSONResponse({"status": "ok", "token": token, "inside": admission.inside,
                             "queued": batcher.queued, **batcher.stats.as_dict()})

    return health


def _info(served: ServedModel, settings: ServeSettings) -> Any:
    from starlette.responses import JSONResponse

    from .runtime import runtime_info

    body = {"model": served.describe(), "runtime": runtime_info(served.model.device, served.runner),
            "server": settings.as_dict()}

    async def info(request: Any) -> Any:
        return JSONResponse(body)

    return info


def _page_file(name: str, media_type: str) -> Any:
    from starlette.responses import Response

    content = (resources.files(__package__) / "page" / name).read_bytes()

    async def page_file(request: Any) -> Any:
        return Response(content, media_type=media_type,
                        headers={"Content-Security-Policy": PAGE_POLICY,
                                 "Cache-Control": "no-cache"})

    return page_file


def _printable(text: str, limit: int = 80) -> str:
    """Client-given text made safe for a log line: printable ASCII, bounded."""
    text = "".join(c if 32 <= ord(c) < 127 else "?" for c in str(text))
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Guard:
    """ASGI middleware: the token, then a place among the requests inside (``/predict``)."""

    def __init__(self, app: Any, token: str | None, admission: Admission) -> None:
        self.app, self.admission = app, admission
        self.token = None if token is None else token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.token is not None and scope["path"] not in OPEN_PATHS \
                and not self._authorised(scope):
            await error(401, "this server needs its token: send Authorization: Bearer TOKEN",
                        {"WWW-Authenticate": 'Bearer realm="sodkit"'})(scope, receive, send)
            return
        if scope["path"] != "/predict" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            self.admission.enter()
        except Busy:
            await error(503, f"busy: {self.admission.capacity} requests are being served; try "
                             f"again shortly", {"Retry-After": str(RETRY_AFTER_S)}
                        )(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.leave()

    def _authorised(self, scope: dict) -> bool:
        given = b""
        for key, value in scope["headers"]:
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        return hmac.compare_digest(given, self.token)


class AccessLog:
    """ASGI middleware: one line per request (``GET /health`` only at debug level)."""

    def __init__(self, app: Any, counts: dict[str, int]) -> None:
        self.app, self.counts = app, counts

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), [0]

        async def watched(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            self.counts["requests"] += 1
            path = _printable(scope["path"])
            note = scope.get("state", {}).get("note", "")
            level = logging.DEBUG if path == "/health" else logging.INFO
            logger.log(level, "%s %s %s %.0f ms%s", scope["method"], path, status[0] or "-",
                       (time.perf_counter() - started) * 1000, f" {note}" if note else "")
