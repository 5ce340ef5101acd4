"""The memory probe's answer remembered per model file (#35 item 6: ``sodkit predict``'s start
at a high input side): the second probe of the same file runs no forward pass and gives the
same bytes; a file replaced or rewritten is probed again; a damaged cache file is ignored and
replaced, never an error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from sodkit.config import ModelCfg
from sodkit.config.schema import DataCfg
from sodkit.engine.predictor import probe_memory
from sodkit.engine.probe_cache import FILE
from sodkit.engine.runtime import OnDevice
from sodkit.inference.pipelines import build_test_transform
from sodkit.model_file import write_model_file
from sodkit.network import build_network


@pytest.fixture
def probed(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SODKIT_CACHE", str(tmp_path / "cache"))
    torch.manual_seed(0)
    net = build_network(ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8)).eval()
    path = write_model_file(tmp_path / "m.safetensors", net.state_dict(), {}, {})
    calls: list[int] = []
    net.register_forward_hook(lambda *_: calls.append(1))
    transform = build_test_transform(DataCfg(size=128), size=128)

    def probe(size: int = 128) -> int | None:
        calls.clear()
        return probe_memory(net, transform, OnDevice(torch.device("cpu")), size, source=path)

    return probe, calls, path, tmp_path / "cache" / FILE


def test_a_second_probe_of_the_same_file_runs_no_forward(probed) -> None:
    probe, calls, path, cache = probed
    first = probe()
    assert first and len(calls) == 2  # the warm-up and the measured pass
    assert probe() == first and calls == []
    assert probe(256) and len(calls) == 2  # another input side is another answer
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # the file rewritten
    assert probe() and len(calls) == 2  # (measured again: within a few percent of the first)
    assert json.loads(cache.read_text())  # sodkit's own file, JSON


@pytest.mark.parametrize("damage", [b"\xff\xfe not json", b"[1, 2]", b'{"k": -5}',
                                    b"{" + b" " * (80 << 10) + b"}"])
def test_a_damaged_cache_file_is_ignored_and_replaced(probed, damage: bytes) -> None:
    probe, calls, _, cache = probed
    assert probe()
    key = next(iter(json.loads(cache.read_text())))
    cache.write_bytes(damage.replace(b'"k"', json.dumps(key).encode()))
    again = probe()
    assert again and len(calls) == 2  # probed again
    assert json.loads(cache.read_text()) == {key: again}
    cache.write_text(json.dumps({key: 10 ** 30}))  # not a probe's answer
    assert probe() and len(calls) == 2
