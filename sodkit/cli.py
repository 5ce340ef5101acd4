"""The ``sodkit`` command: parse arguments, then hand over to one module per sub-command.

Command modules import torch and friends inside ``run`` only, so ``sodkit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path

from .errors import Preempted, UserError, WriteFailed, worker_death, write_error_line
from .registry import Registry
from .version import __version__

# sub-command -> its module, which holds HELP, add_arguments(parser) and run(args) -> int (light
# at import: heavy imports inside run); listed in this order by --help
COMMANDS: Registry[str] = Registry("command")
for _name in ("train", "test", "predict", "eval", "report", "check-data", "bench", "info",
              "convert-checkpoint", "export", "import-weights", "models", "serve"):
    COMMANDS.add(_name, f"sodkit.commands.{_name.replace('-', '_')}")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: ``--help``, ``--version`` and the list of commands."""
    parser = argparse.ArgumentParser(
        prog="sodkit", description="Train, evaluate and run salient object detection models."
    )
    parser.add_argument("--version", action="version", version=f"sodkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(COMMANDS[name])
        sub.add_parser(name, help=module.HELP, description=module.HELP, add_help=False)
    return parser


def build_command_parser(name: str) -> argparse.ArgumentParser:
    """One command's own parser (``sodkit train ...``), used with ``parse_intermixed_args``."""
    module = importlib.import_module(COMMANDS[name])
    parser = argparse.ArgumentParser(prog=f"sodkit {name}", description=module.HELP)
    module.add_arguments(parser)
    parser.set_defaults(command=name, _run=module.run)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse a command line; ``key=value`` overrides and inputs may come before or after options.

    argparse stops collecting a positional list at the first option (``test CONFIG --checkpoint
    P name=x`` would fail), and ``parse_intermixed_args`` does not support sub-parsers, so the
    command is picked first and its own parser parses the rest intermixed.
    """
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # help, version, or a usage error: exits
    return build_command_parser(argv[0]).parse_intermixed_args(argv[1:])


# commands whose forward passes wait at every operator for OpenMP's threads: theirs sleep
# while they wait instead of spinning (docs/inference.md, "Threads")
PASSIVE_THREADS = ("predict", "test", "serve")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.command in PASSIVE_THREADS and "torch" not in sys.modules:
        # read once, when torch loads its OpenMP: spinning threads on a machine whose cores
        # other processes hold made PyTorch's 2-thread forward 2-16x slower than this; on an
        # idle machine sleeping costs 7% (MINet-R50) to the second thread's whole gain on a
        # tiny network (benchmarks/RESULTS.md, "Threads under load"); the user's setting wins
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    from .engine.logging import keep_libraries_quiet

    keep_libraries_quiet()  # only sodkit's own lines reach the terminal
    if "TORCHELASTIC_ERROR_FILE" in os.environ:
        # torchrun's error file: the launcher then reports which rank failed, with its traceback.
        from torch.distributed.elastic.multiprocessing.errors import record

        return record(_run)(args)
    return _run(args)


def console_main() -> int:
    """The ``sodkit`` command (and ``python -m sodkit``): :func:`main` in a process that ends
    right after it. Everything still alive is moved out of the cyclic collector's reach first,
    so the interpreter's exit skips its passes over every object (with matplotlib loaded,
    0.1-0.2 s of a 3 s ``sodkit eval``); the process frees the memory anyway. Not for
    :func:`main` itself, which tests and notebooks call in a process that goes on. Imports run
    with the collector off (:mod:`sodkit.import_gc`: a fifth to a third of a start)."""
    from . import import_gc

    import_gc.install()
    from .resources import mark_started_by_command  # light: no torch

    mark_started_by_command()
    from .engine import preemption  # light: no torch

    preemption.DEADLINE_OUTLIVES_RUN = True  # this process ends with the run
    code = main()
    gc.freeze()
    return code


# after a failed write in `sodkit train`: checkpoints are written atomically, so those saved
# before are whole (a WriteFailed says so itself)
_RESUME = "; once there is room, training continues from its last checkpoint with --resume auto"
_INTACT = "; checkpoints written before are intact"


def _run(args: argparse.Namespace) -> int:
    """Run the command; every failure the user can act on ends in one line on stderr.

    Exit codes: 0 done, 2 a user error (bad input, a refused output, or an output that could
    not be written: a full disk, a read-only folder, a file size limit), 75 stopped on request
    (training, resumable), 130 interrupted, 1 a data loading worker died; anything else is a
    bug and keeps its traceback.
    """
    training = args.command == "train"
    try:
        from .progress import interval_s

        interval_s()  # SODKIT_PROGRESS_S: a bad setting is one line before any work
        return int(args._run(args) or 0)
    except WriteFailed as exc:
        _report(args, f"error: {exc}{_RESUME if training else ''}")
        return 2
    except UserError as exc:
        _report(args, f"error: {exc}", same_on_every_rank=True)
        return 2
    except Preempted as exc:
        _report(args, str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        _report(args, str(exc) or "interrupted")
        return 130
    except Exception as exc:
        line = write_error_line(exc) if isinstance(exc, OSError) else None
        if line is not None:
            _report(args, f"error: {line}{_INTACT + _RESUME if training else ''}")
            return 2
        reason = worker_death(exc)
        if reason is not None:
            after = "; training continues from its last checkpoint with --resume auto"
            _report(args, f"error: {reason}{after if args.command == 'train' else ''}")
            return 1
        from .engine.launcher import log_failure

        log_failure(exc)
        raise


# how long a rank other than 0 waits, after a user error under torchrun, for the launcher to
# stop it (see _report)
PEER_REPORT_WAIT_S = 20.0


def _report(args: argparse.Namespace, message: str, same_on_every_rank: bool = False) -> None:
    """One line on stderr. Under torchrun it also goes to the launcher's error file, so that
    torchrun's failure summary shows it for each rank, and only rank 0 prints it: a config error
    is otherwise printed by every one of 64 processes.

    torchrun stops every other rank (SIGTERM) as soon as one fails. A user error that every rank
    finds (a bad setting) could thus end rank 1 first and rank 0 be stopped before it prints:
    the line would then only be in the summary. So a rank other than 0 waits, up to
    :data:`PEER_REPORT_WAIT_S`, for the launcher to stop it after rank 0 has printed and
    failed; an error that rank 0 does not share ends the job that much later, with the line in
    the summary."""
    line = f"sodkit {args.command}: {message}"
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        with contextlib.suppress(OSError):
            # torchelastic's format; its summary shows `py_callstack` as the traceback
            info = {"py_callstack": line, "timestamp": str(int(time.time()))}
            Path(error_file).write_text(json.dumps({"message": {"message": line,
                                                                "extraInfo": info}}))
    if not error_file or _rank() == 0:
        print(line, file=sys.stderr)
    elif same_on_every_rank:
        time.sleep(PEER_REPORT_WAIT_S)


def _rank() -> int:
    from .engine.launcher import detect_dist_env

    try:
        return detect_dist_env().rank
    except UserError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
