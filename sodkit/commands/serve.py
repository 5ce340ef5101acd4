"""``sodkit serve``: a model behind HTTP on this machine, with a web page (:mod:`sodkit.serve`).

Needs the ``serve`` extra (``pip install 'sodkit[serve]'``): Starlette, uvicorn and
python-multipart; without it, one line says so before the model is loaded.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os

from ..argtypes import float_in, int_in
from ..config.schema import MAX_SIZE, MIN_SIZE
from ..serve.settings import (
    DEFAULT_CAPACITY,
    DEFAULT_DRAIN_S,
    DEFAULT_HOST,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_PORT,
    TOKEN_VARIABLE,
)
from ._common import add_model_arguments, add_runtime_arguments, add_weights_argument

HELP = "serve a model over HTTP: POST /predict, a web page at /, GET /health and /info"
NEEDS = ("starlette", "uvicorn", "python_multipart")
logger = logging.getLogger("sodkit.serve")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}: this machine "
                             f"only; 0.0.0.0: every network, then set a token)")
    parser.add_argument("--port", type=int_in(0, 65535), default=DEFAULT_PORT,
                        help=f"port (default {DEFAULT_PORT}; 0: any free one, said at start)")
    parser.add_argument("--token", default=None,
                        help=f"require 'Authorization: Bearer TOKEN' (better: the environment "
                             f"variable {TOKEN_VARIABLE}, which other users' ps cannot show)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    add_weights_argument(parser)
    parser.add_argument("--size", type=int_in(MIN_SIZE, MAX_SIZE),
                        help="network input side (default: the training size)")
    parser.add_argument("--threads", type=int_in(1, 1024),
                        help="compute threads of the forward pass (default: the cores)")
    add_runtime_arguments(parser)
    parser.add_argument("--max-batch", type=int_in(1, 256), default=DEFAULT_MAX_BATCH,
                        help=f"most images in one forward pass (default {DEFAULT_MAX_BATCH})")
    parser.add_argument("--max-wait-ms", type=float_in(0.0, 1000.0),
                        default=DEFAULT_MAX_WAIT_MS,
                        help=f"how long a request waits for others to share its forward pass "
                             f"(default {DEFAULT_MAX_WAIT_MS:g})")
    parser.add_argument("--queue", type=int_in(1, 4096), default=DEFAULT_CAPACITY,
                        help=f"requests inside the server at once; more are answered 503 with "
                             f"Retry-After (default {DEFAULT_CAPACITY})")
    parser.add_argument("--drain-timeout", type=float_in(0.0, 86400.0), default=DEFAULT_DRAIN_S,
                        metavar="SECONDS",
                        help=f"after SIGTERM, how long requests in flight may take to finish "
                             f"(default {DEFAULT_DRAIN_S:g})")


def check_installed() -> None:
    from importlib.util import find_spec

    from ..errors import UserError

    missing = [name for name in NEEDS if find_spec(name) is None]
    if missing:
        raise UserError(f"sodkit serve needs {', '.join(missing)}: pip install 'sodkit[serve]' "
                        f"(in a clone: pip install -e '.[serve]')")


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def run(args: argparse.Namespace) -> int:
    import torch

    from ..resources import default_threads
    from ..serve import ServeSettings, create_app, load_served
    from ..serve.server import address_of, listen, run_server

    check_installed()
    token = args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE) or None
    sock = listen(args.host, args.port)  # before the model loads: a port in use says so first
    with sock:
        torch.set_num_threads(args.threads or default_threads())
        by_name = bool(args.model)
        served = load_served(args.model if by_name else args.checkpoint, by_name, args.device,
                             args.weights, args.size, args.runtime, args.precision)
        settings = ServeSettings(args.max_batch, args.max_wait_ms, args.queue, token)
        app = create_app(served, settings)
        if not _loopback(args.host) and token is None:
            logger.warning("listening on %s without a token: anyone who reaches this machine "
                           "can use it (set %s)", args.host, TOKEN_VARIABLE)
        logger.info("serving %s on %s (%s, %s, %d threads, batches of up to %d, queue %d%s)",
                    served.name, address_of(sock), served.model.device, served.runner,
                    torch.get_num_threads(), args.max_batch, args.queue,
                    ", token required" if token else "")
        stopped = run_server(app, sock, args.drain_timeout)
    if stopped:
        logger.info("stopped on SIGTERM")
    return 0
