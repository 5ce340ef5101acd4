"""Loading a model for inference without its fixed costs (#23's speed item): a network built
for a file's weights (``build_network(..., initialise=False)``) skips the random initialisation
and, once the weights are loaded strictly, is the same network as one built the usual way; the
check that refuses NaN / infinite weights takes a faster path with exactly the same answers; an
inference read maps the checkpoint instead of reading it whole (torch's legacy format too); and
the inference commands let glibc keep freed memory instead of faulting it in at every batch."""

from __future__ import annotations

import copy
import platform
import subprocess
import sys
import threading
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

from sodkit.checkpoint_weights import _all_finite, assign_weights
from sodkit.config import ModelCfg
from sodkit.model_file import read_model_file, write_model_file
from sodkit.module.no_init import skip_parameter_init
from sodkit.network import build_network
from sodkit.torchfile import load_checkpoint
from sodkit.trained import load_weights


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
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow is the answer, not the user's news
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


def _storages(tensors) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in tensors if t.numel()}


@pytest.mark.parametrize(("name", "backbone"), [
    ("fpn", "resnet18"),  # BatchNorm: running statistics and num_batches_tracked in the file
    ("birefnet", "swin_tiny_patch4_window7_224"),  # non-persistent relative position indices
])
def test_assigned_weights_give_the_usual_network(tmp_path: Path, name: str, backbone: str
                                                 ) -> None:
    """Weights assigned from a model file (copied by numpy, or the file's mapped pages
    themselves) give the network that ``load_state_dict``'s copies into a usually built one
    give: every parameter and buffer equal (those the file lacks computed at the build), the
    same frozen parameters, the same logits; copies own their memory.

    The logits are the same bit for bit where the weights lie where torch would put them. The
    mapped pages are only 4-byte aligned (safetensors packs its tensors), and on some CPUs
    (an AMD EPYC with AVX-512-BF16) oneDNN then takes other kernels, whose other summation
    order moved BiRefNet's logits by 4.5e-8 (their float32 round-off against float64 is
    9.3e-8). So the mapped network is compared twice: in float64, where round-off is far
    below anything a wrong network changes (a flipped relative position index moves the
    float32 logits by 1e-6), bit for bit; and on its mapped pages in float32, within
    float32 round-off."""
    cfg = ModelCfg(name=name, backbone=backbone, decoder_channels=8)
    torch.manual_seed(0)
    usual = build_network(cfg).eval()
    path = write_model_file(tmp_path / "m.safetensors", usual.state_dict(), {}, {})
    image = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        logits = usual(image)["logits"]
    for mapped in (False, True):
        _check_assigned(cfg, usual, path, mapped, image, logits)


def _check_assigned(cfg: ModelCfg, usual: nn.Module, path: Path, mapped: bool,
                    image: torch.Tensor, logits: torch.Tensor) -> None:
    state = read_model_file(path)
    fast = build_network(cfg, initialise=False)
    assert load_weights(fast, state, path, mapped=mapped) == "model"
    fast.eval()
    usual_tensors = {**dict(usual.named_parameters()), **dict(usual.named_buffers())}
    fast_tensors = {**dict(fast.named_parameters()), **dict(fast.named_buffers())}
    assert fast_tensors.keys() == usual_tensors.keys()
    for key, value in fast_tensors.items():
        assert value.dtype == usual_tensors[key].dtype and torch.equal(
            value, usual_tensors[key]), key
    assert all(isinstance(p, nn.Parameter) for p in fast.parameters())
    assert [(k, p.requires_grad) for k, p in fast.named_parameters()] == \
        [(k, p.requires_grad) for k, p in usual.named_parameters()]
    shared = _storages(fast.parameters()) & _storages(state["model"].values())
    assert bool(shared) is mapped
    with torch.no_grad():
        if not mapped:
            assert torch.equal(fast(image)["logits"], logits)
            return
        torch.testing.assert_close(fast(image)["logits"], logits)  # float32 tolerances
        fast64 = fast.double()(image.double())["logits"]
        usual64 = copy.deepcopy(usual).double()(image.double())["logits"]
    assert torch.equal(fast64, usual64)


def test_assigned_weights_take_the_networks_dtype_and_keep_tied_weights() -> None:
    """A file's float16 weights become the network's float32 ones (as ``load_state_dict``
    casts them); weights tied in the network stay one tensor."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    half = {k: v.half() for k, v in net.state_dict().items()}
    fresh = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    assign_weights(fresh, half)
    for key, value in fresh.state_dict().items():
        assert value.dtype == torch.float32 and torch.equal(value, half[key].float()), key
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    weights = {k: v.clone() for k, v in tied.state_dict().items()}
    assign_weights(tied, weights)
    assert tied[1].weight is tied[0].weight
    assert torch.equal(tied[0].weight, weights["0.weight"])


def test_a_copied_model_keeps_its_weights_when_its_file_is_rewritten_in_place(tmp_path: Path
                                                                              ) -> None:
    """The API's and the server's models own their weights: a model file rewritten in place
    (``cp other.safetensors model.safetensors``) leaves their masks as they were; a mapped
    load (``sodkit predict``, which ends when done) reads the file's pages as they are now."""
    from sodkit.config import load_config, to_dict
    from sodkit.trained import load_trained

    cfg = load_config(None, ["model.name=fpn", "model.backbone=resnet18",
                             "model.decoder_channels=8", "model.pretrained=null"])
    torch.manual_seed(0)
    path = write_model_file(tmp_path / "m.safetensors", build_network(cfg.model).state_dict(),
                            to_dict(cfg), {})
    copied = load_trained(path, device="cpu").network
    mapped = load_trained(path, device="cpu", mapped=True).network
    image = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        before = copied(image)["logits"]
        assert torch.equal(mapped(image)["logits"], before)
    header = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    with open(path, "r+b") as fh:  # the same size, other weights
        fh.seek(header)
        fh.write(bytes(path.stat().st_size - header))
    with torch.no_grad():
        assert torch.equal(copied(image)["logits"], before)
        assert not torch.equal(mapped(image)["logits"], before)
