"""Fixtures shared by the end-to-end test modules: one small dataset and one trained run, built
once per test run (once for all pytest-xdist workers).

Every test, and every process a test starts (they inherit the environment), computes with one
intra-op thread. The networks here are tiny: a second OpenMP thread buys little on a quiet
machine, and on a busy one its spin-waits at every operator make a step up to 10 times slower
(test_networks + test_checkpointing: 29 s with one thread, 338 s with two beside other work;
docs/testing.md). One thread also makes results the same on every machine: a run in the test
process and the same run in a subprocess sum in the same order.
"""

from __future__ import annotations

import gc
import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch is imported: its pool is sized once
gc.disable()  # while the test modules are imported: see pytest_collection_finish

import collections  # noqa: E402
import fcntl  # noqa: E402
import shutil  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from sodkit.cli import main  # noqa: E402
from tests.sod_fixtures import tiny_overrides, write_duts_layout  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)  # in case torch was imported before this file (a plugin)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder ``name``, made by ``build(folder)`` once for the whole test run.

    Alone, in this session's temporary folder. Under pytest-xdist (``make test``), in the
    folder that the run's workers share: the first worker to come builds it under a lock, the
    others wait and reuse it, so that each is built once, not once per worker. A build that
    failed leaves no ``.done`` mark: the next worker starts it anew (and fails the same way)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent  # one per run, shared by its workers
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".done").touch()
    return folder


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "sod", write_duts_layout)


@pytest.fixture(scope="session")
def trained(data_root, tmp_path_factory) -> Path:
    """A finished 2-epoch run folder (checkpoints, predictions, results); read, never modify."""

    def train(out: Path) -> None:
        overrides = tiny_overrides(data_root, out, "t")
        assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0

    return built_once(tmp_path_factory, "runs", train) / "t"


@pytest.fixture(scope="session", autouse=True)
def _onnx_cache(tmp_path_factory):
    """The ONNX graphs ``sodkit predict`` exports (``--runtime auto`` on the CPU) go to this
    session's folder, not the user's cache; processes the tests start inherit it."""
    os.environ["SODKIT_ONNX_CACHE"] = str(tmp_path_factory.mktemp("onnx-cache"))
    yield


@pytest.fixture(autouse=True)
def _no_stop_deadline_left_armed():
    """A run stopped by a signal in this process (``main`` called by a test) must not leave its
    ``runtime.stop_grace_s`` deadline armed: it would end the process that long after the
    signal, here pytest's, minutes later in another test (exit 143, no summary; it happened
    before ``sodkit/engine/preemption.py`` kept the deadline to the command's own process). A
    test that leaves one armed is failed here, and the deadline disarmed so the session goes on.
    """
    yield
    armed = []
    for thread in threading.enumerate():
        deadline = getattr(getattr(thread, "_target", None), "__self__", None)
        if thread.name == "sodkit-stop-deadline" and deadline is not None \
                and deadline._armed.is_set() and not deadline._stop.is_set():
            deadline._stop.set()
            thread.join()  # within its 0.5 s poll
            armed.append(deadline)
    if armed:
        pytest.fail("a run stopped by a signal in the test process left its stop deadline "
                    "armed: it would end pytest runtime.stop_grace_s later")


@pytest.fixture
def run_cli(capfd, monkeypatch):
    """``sodkit ARGS`` (in folder ``cwd`` if given), in the test process: its exit code, and
    what it wrote on stdout and stderr (its log in the command's format, and what loader
    workers it forks write). In this process rather than a fresh ``python -m sodkit``, whose
    start (importing torch and sodkit) costs 2-3 s of CPU a call; what needs a real process
    (a signal from outside, a resource limit, torchrun) keeps one."""
    import logging
    import subprocess
    import sys

    from sodkit.cli import main

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capfd.readouterr()
        root, handler = logging.getLogger(), logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))  # as sodkit.cli.main sets it
        level = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            code = main(list(args))
        except SystemExit as usage:  # argparse's own refusals
            code = usage.code
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


def pytest_collection_finish(session: pytest.Session) -> None:
    """The objects the imports made (torch, timm, sodkit, every test module: about 540,000)
    kept out of the cyclic garbage collector's passes: each full pass walked them all, 7% of a
    worker's CPU time in test_checkpointing, test_init_from and their neighbours (measured with
    ``gc.callbacks``). They live as long as the process; what a test makes is collected as
    before. The collector was off while they were made (as in a ``sodkit`` process:
    :mod:`sodkit.import_gc`)."""
    gc.collect()
    gc.freeze()
    gc.enable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules with the most slow or multi-process tests first, each module's tests in their
    order: ``make test`` hands whole modules to its workers in this order (pytest-xdist
    ``--dist loadscope``, so that a module's fixtures are built once; ``--no-loadscope-reorder``,
    or xdist puts the modules with the most tests first), and a long module taken last would
    leave the other worker idle at the end."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    heavy = collections.Counter(module(item) for item in items
                                if item.get_closest_marker("slow")
                                or item.get_closest_marker("multiprocess"))
    first_seen = {name: i for i, name in enumerate(dict.fromkeys(map(module, items)))}
    items.sort(key=lambda item: (-heavy[module(item)], first_seen[module(item)]))
