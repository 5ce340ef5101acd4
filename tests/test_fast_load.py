"""Loading a model for inference without its fixed costs (#23's speed item): a network built
for a file's weights (``build_network(..., initialise=False)``) skips the random initialisation
and, once the weights are loaded strictly, is the same network as one built the usual way; the
check that refuses NaN / infinite weights takes a faster path with exactly the same answers; an
inference read maps the checkpoint instead of reading it whole (torch's legacy format too); and
the inference commands let glibc keep freed memory instead of faulting it in at every batch."""

from __future__ import annotations

import platform
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from sodkit.checkpoint_weights import _all_finite
from sodkit.config import ModelCfg
from sodkit.network import build_network
from sodkit.network.no_init import skip_parameter_init
from sodkit.torchfile import load_checkpoint


@pytest.mark.parametrize(("name", "backbone"), [
    ("fpn", "resnet18"), ("minet", "resnet18"), ("f3net", "resnet18"),
    ("fpn", "swin_tiny_patch4_window7_224"),  # non-persistent buffers (relative position index)
])
def test_loaded_network_equals_the_usual_build(name: str, backbone: str) -> None:
    cfg = ModelCfg(name=name, backbone=backbone, decoder_channels=8)
    torch.manual_seed(0)
    usual = build_network(cfg).eval()
    rng = torch.random.get_rng_state()
    fast = build_network(cfg, initialise=False)
    assert torch.equal(torch.random.get_rng_state(), rng)  # no random initialisation ran
    fast.load_state_dict(usual.state_dict())
    fast.eval()
    usual_buffers = dict(usual.named_buffers())  # the non-persistent ones too
    for key, value in fast.named_buffers():
        assert torch.equal(value, usual_buffers[key]), key
    assert [(k, p.requires_grad) for k, p in fast.named_parameters()] == \
        [(k, p.requires_grad) for k, p in usual.named_parameters()]
    image = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(fast(image)["logits"], usual(image)["logits"])


def test_frozen_parameters_stay_frozen() -> None:
    cfg = ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8, freeze=["backbone"])
    fast = build_network(cfg, initialise=False)
    assert not any(p.requires_grad for p in fast.backbone.parameters())
    assert all(p.requires_grad for k, p in fast.named_parameters() if not k.startswith("backbone"))


def test_only_parameters_inside_the_context_and_thread_are_skipped() -> None:
    torch.manual_seed(0)
    with skip_parameter_init():
        plain = torch.zeros(3).normal_()  # a tensor, not a parameter: filled as usual
        param = nn.Parameter(torch.full((3,), 7.0))
        nn.init.normal_(param)
        elsewhere: list[torch.Tensor] = []
        other = threading.Thread(target=lambda: elsewhere.append(
            nn.init.constant_(nn.Parameter(torch.zeros(3)), 2.0).detach()))
        other.start()
        other.join()
    assert not torch.equal(plain, torch.zeros(3))
    assert torch.equal(param.detach(), torch.full((3,), 7.0))  # left as it was
    assert torch.equal(elsewhere[0], torch.full((3,), 2.0))  # another thread: initialised
    after = nn.Parameter(torch.zeros(3))
    nn.init.constant_(after, 5.0)
    assert torch.equal(after.detach(), torch.full((3,), 5.0))  # the context is gone after


@pytest.mark.parametrize(("values", "finite"), [
    ([1.0, -2.0, 3.0], True),
    ([1.0, float("nan"), 3.0], False),
    ([1.0, float("inf"), 3.0], False),
    ([float("inf"), float("-inf")], False),  # their sum is NaN, not a cancellation
    ([3e38, 3e38, -1.0], True),  # finite values whose float32 sum overflows
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_finite_check_answers_as_isfinite_all(values, finite, dtype) -> None:
    tensor = torch.tensor(values).clamp(-6e4, 6e4) if dtype == torch.float16 and finite \
        else torch.tensor(values)
    tensor = tensor.to(dtype)
    assert _all_finite(tensor) is bool(tensor.isfinite().all()) is finite


@pytest.mark.parametrize("form", ["zip", "legacy", "rezipped"])
def test_an_inference_read_maps_the_checkpoint_in_any_torch_format(tmp_path: Path,
                                                                   form: str) -> None:
    """torch.save's zip format is mapped; torch's legacy format and a zip whose records were
    compressed afterwards (torch cannot map those) are read as before, not refused."""
    saved = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "optimizer": {"m": torch.ones(4)}}
    path = tmp_path / "ckpt.pt"
    torch.save(saved, path, _use_new_zipfile_serialization=form != "legacy")
    if form == "rezipped":
        with zipfile.ZipFile(path) as src:
            records = [(info.filename, src.read(info)) for info in src.infolist()]
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
            for name, data in records:
                out.writestr(name, data)
    mapped = load_checkpoint(path, mmap=True)
    assert torch.equal(mapped["model"]["w"], saved["model"]["w"])
    assert torch.equal(mapped["optimizer"]["m"], saved["optimizer"]["m"])


# 120 blocks of 200 KiB, all freed, 20 times: glibc maps the first ones, raises its threshold
# when they are freed, and then returns the freed heap top to the system each round
_FAULTS = """
import resource, sys
import numpy as np
from sodkit.resources import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
def rounds(n):
    for _ in range(n):
        blocks = [np.ones(200 << 10, np.uint8) for _ in range(120)]
        del blocks
rounds(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds(20)
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc thresholds")
def test_freed_memory_is_reused_instead_of_faulted_in_again() -> None:
    """``predict`` and ``test`` call ``keep_freed_memory``: a forward pass's activations (here
    24 MB in blocks) then come back from the heap each round, where by default every round
    faults them in anew (about 6,000 pages a round)."""
    said = {}
    for mode in ("default", "keep"):
        out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).resolve().parents[1])
        said[mode] = out.stdout.split()
    assert said["default"][0] == "False" and int(said["default"][1]) > 20 * 5000, said
    assert said["keep"][0] == "True" and int(said["keep"][1]) < 1000, said
