"""The thread that encodes and writes each batch's masks beside the next forward pass
(``sodkit predict``, #23's speed item): every file written, in order; a failure in the thread
is raised in the command; a failure in the loop still writes what was handed over."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from sodkit.config import RuntimeCfg
from sodkit.engine.overlap import OutputThread
from sodkit.engine.rounds import MaskWriter
from sodkit.engine.runtime import Runtime
from sodkit.outputs import OutputFolder


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    return Runtime(RuntimeCfg(device="cpu", seed=0))


def _writer(runtime: Runtime, root: Path, rounds: int) -> MaskWriter:
    return MaskWriter(runtime, rounds, 1, OutputFolder.at(root))


def test_every_round_is_written_in_order_by_one_thread(runtime, tmp_path) -> None:
    order: list[tuple[str, str]] = []

    def job(i: int):
        def make():
            time.sleep(0.01 * (i % 3))  # uneven jobs: the order must not depend on them
            order.append((threading.current_thread().name, f"{i}"))
            return [(tmp_path / f"{i}.png", f"mask {i}".encode())]
        return make

    with OutputThread(_writer(runtime, tmp_path, 7), runtime) as output:
        for i in range(7):
            output.put(job(i))
            assert len(output.pending) <= output.depth  # bounded: the loop waits, not memory
    assert [name for _, name in order] == [str(i) for i in range(7)]
    assert {thread for thread, _ in order} != {threading.current_thread().name}
    assert len({thread for thread, _ in order}) == 1
    for i in range(7):
        assert (tmp_path / f"{i}.png").read_bytes() == f"mask {i}".encode()


def test_a_failure_in_the_thread_is_raised_in_the_loop(runtime, tmp_path) -> None:
    def broken():
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"), \
            OutputThread(_writer(runtime, tmp_path, 4), runtime) as output:
        output.put(broken)
        for i in range(3):
            output.put(lambda i=i: [(tmp_path / f"{i}.png", b"x")])


def test_a_failure_in_the_loop_still_writes_what_was_handed_over(runtime, tmp_path) -> None:
    release = threading.Event()

    def slow():
        release.wait(5)
        return [(tmp_path / "first.png", b"first")]

    with pytest.raises(ValueError, match="NaN"), \
            OutputThread(_writer(runtime, tmp_path, 3), runtime) as output:
        output.put(slow)
        output.put(lambda: [(tmp_path / "second.png", b"second")])
        release.set()
        raise ValueError("NaN in the third batch")
    assert (tmp_path / "first.png").read_bytes() == b"first"
    assert (tmp_path / "second.png").read_bytes() == b"second"
