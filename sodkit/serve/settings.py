"""The server's settings (``sodkit serve``'s options), with their defaults and why."""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_VARIABLE = "SODKIT_SERVE_TOKEN"
DEFAULT_HOST = "127.0.0.1"  # this machine only, unless told otherwise
DEFAULT_PORT = 7000  # rembg's `rembg s` default: a client written for it finds this one too
# Batching: benchmarks/serve_load.py measures these (benchmarks/RESULTS.md, "sodkit serve").
DEFAULT_MAX_BATCH = 8
DEFAULT_MAX_WAIT_MS = 2.0
DEFAULT_CAPACITY = 32  # requests inside the server at once (body read .. answer sent)
DEFAULT_DRAIN_S = 60.0  # after SIGTERM: how long requests in flight may take to finish
RETRY_AFTER_S = 1  # what a 503 asks the client to wait


@dataclass(frozen=True)
class ServeSettings:
    max_batch: int = DEFAULT_MAX_BATCH
    max_wait_ms: float = DEFAULT_MAX_WAIT_MS
    capacity: int = DEFAULT_CAPACITY
    token: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"max_batch": self.max_batch, "max_wait_ms": self.max_wait_ms,
                "queue": self.capacity, "token": self.token is not None}
