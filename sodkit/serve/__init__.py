"""``sodkit serve``: a model behind HTTP, with a web page (the ``serve`` extra: Starlette,
uvicorn, python-multipart).

    app.py       the routes (POST /predict, GET /health, /info, /), the token, the log lines
    batching.py  requests let in (bounded) and batched onto one worker thread's forward passes
    model.py     bytes -> decoded and transformed -> scores -> the PNGs ``sodkit predict`` writes
    upload.py    the image out of a request body (raw or multipart), in memory, within limits
    server.py    uvicorn: the socket, quiet library logs, SIGTERM drains then exits 0
    runtime.py   what GET /info says of the device, threads and limits
    page/        the page at / (HTML, CSS, JavaScript; no build step, nothing from elsewhere)

Built on the loader of trained models (:func:`sodkit.trained.load_trained`) and on
:mod:`sodkit.inference` (the forward, the encoding of each kind), so a response is the file
``sodkit predict --save KIND`` writes for the same photo.
"""

from __future__ import annotations

from .settings import ServeSettings

__all__ = ["ServeSettings", "create_app", "load_served"]


def __getattr__(name: str):  # the application's pieces import on first use
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "load_served":
        from .model import load_served

        return load_served
    raise AttributeError(name)
