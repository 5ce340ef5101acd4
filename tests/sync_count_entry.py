"""Test-only entry point: ``sodkit`` under torchrun, counting what each training step asks of
the host (``tests/test_ddp.py::test_a_training_step_asks_the_host_once``).

``python tests/sync_count_entry.py OUT_JSON <sodkit arguments> [--then <sodkit arguments> ...]``:
the first command is counted; the others (``tests/commands_entry.py``) run after it with the
counting removed, so that other tests' runs share this launch. Counted per step, from the
start of one ``TrainStep`` call to the start of the next: torch.distributed calls made from
Python (DDP's gradient all-reduce runs in C++ and is not among them) and reads of a tensor's
value (``item``, ``tolist``, ``bool``, ``float``, ``int``, ``numpy``), each with where it came
from. Calls made inside another counted call are not counted again. Production code has no such
switch; this script wraps the functions in its own process only.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import command_process  # noqa: F401 - first: imports as the sodkit command's
import torch
import torch.distributed as dist
from commands_entry import commands  # this folder: the script's own (sys.path[0])

import sodkit
from sodkit.cli import main
from sodkit.engine.step import TrainStep

# Paths are named relative to the package, whatever the checkout's folder is called (a clone
# into a folder named ``sodkit`` has ``.../sodkit/sodkit/engine/...``).
PACKAGE = Path(sodkit.__file__).resolve().parent

COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce",
               "gather", "scatter", "barrier", "all_gather_object", "gather_object",
               "broadcast_object_list", "reduce_scatter", "all_to_all")
READS = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy")

steps: list[dict[str, list[str]]] = []
depth = [0]


def _caller() -> str:
    """The innermost function of sodkit's own code on the stack (``engine/runtime.py:any_rank``):
    what asked."""
    for frame in reversed(traceback.extract_stack()[:-2]):  # not this function, not the wrapper
        path = Path(frame.filename).resolve()
        if path.is_relative_to(PACKAGE):
            return f"{path.relative_to(PACKAGE).as_posix()}:{frame.name}"
    return "?"


def _counted(kind: str, name: str, original):
    def wrapped(*args, **kwargs):
        if depth[0] == 0 and steps:
            steps[-1][kind].append(f"{name} from {_caller()}")
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
    return wrapped


def install() -> Callable[[], None]:
    """Wrap the counted functions; returns what puts the originals back."""
    originals = [(dist, name, getattr(dist, name)) for name in COLLECTIVES if hasattr(dist, name)]
    originals += [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in READS]
    originals.append((TrainStep, "__call__", TrainStep.__call__))
    for name in COLLECTIVES:
        if hasattr(dist, name):
            setattr(dist, name, _counted("collectives", name, getattr(dist, name)))
    for name in READS:
        setattr(torch.Tensor, name, _counted("reads", name, getattr(torch.Tensor, name)))
    call = TrainStep.__call__

    def step(self, *args, **kwargs):
        steps.append({"collectives": [], "reads": []})
        return call(self, *args, **kwargs)

    TrainStep.__call__ = step

    def restore() -> None:
        for owner, name, original in originals:
            setattr(owner, name, original)

    return restore


if __name__ == "__main__":
    counted, *rest = commands(sys.argv[2:])
    restore = install()
    code = main(counted)
    restore()
    with open(f"{sys.argv[1]}.{os.environ.get('RANK', '0')}", "w") as handle:
        json.dump(steps, handle, indent=1)
    for args in rest:
        code = code or main(args)
    raise SystemExit(code)
