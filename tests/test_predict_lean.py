"""``sodkit predict`` without torch (issue 35): when a cached ONNX graph does everything asked,
the command imports neither torch, torchvision nor timm, and writes the masks the full path
writes; anything it cannot do (no index entry, a changed model file, a garbled index, a video,
``--runtime torch``, a GPU asked for) takes the full path, as before.

Which path ran is read from the opening line: the torch-free path decodes in threads
("decoding thread"), the full path in processes ("decoding worker")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.config import DataCfg
from sodkit.inference.forward import predict_scores
from sodkit.inference.numpy_pipelines import NumpyPipeline, resize_antialiased
from sodkit.inference.pipelines import PIPELINES, build_test_transform, postprocess_of
from sodkit.outputs import kind_of
from sodkit.runners.graph_index import FILE
from tests.sod_fixtures import write_photos, write_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[1]
LEAN, FULL = "decoding thread", "decoding worker"


def _masks(folder: Path) -> dict[str, np.ndarray]:
    return {p.name: cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(folder.glob("*.png"))}


def _assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """Every pixel within 1/255, at least 99.9% equal."""
    assert a.keys() == b.keys() and a
    diff = np.concatenate([np.abs(a[k].astype(int) - b[k].astype(int)).ravel() for k in a])
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.999, (diff.max(), (diff == 0).mean())


@pytest.fixture
def own_cache(tmp_path, monkeypatch) -> Path:
    """An ONNX cache of the test's own: no index before its first run."""
    folder = tmp_path / "onnx-cache"
    monkeypatch.setenv("SODKIT_ONNX_CACHE", str(folder))
    monkeypatch.setenv("SODKIT_CACHE", str(tmp_path / "cache"))
    return folder


def _blocked(folder: Path) -> Path:
    """A PYTHONPATH folder where importing torch, torchvision or timm fails."""
    for name in ("torch", "torchvision", "timm"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(
            f"raise ImportError('{name} was imported by sodkit predict')\n")
    return folder


def test_a_cached_graph_predicts_without_torch(trained, data_root, tmp_path, own_cache,
                                               run_cli):
    """The first run (no index) takes the full path and indexes the graph it exports; the
    second, a real process in which importing torch fails, runs from the index and writes the
    same masks (to 1/255 on >= 99.9% of pixels), as PyTorch's do."""
    checkpoint = str(trained / "checkpoints" / "last.pt")
    photos = data_root / "DUTS-TE" / "DUTS-TE-Image"
    first = run_cli("predict", "--checkpoint", checkpoint, str(photos), "--out",
                    str(tmp_path / "full"), "--runtime", "onnx")
    assert first.returncode == 0 and FULL in first.stderr, first.stderr
    assert (own_cache / FILE).is_file() and len(list(own_cache.glob("*.optimised.onnx"))) == 1
    env = {**os.environ, "PYTHONPATH": f"{_blocked(tmp_path / 'blocked')}{os.pathsep}{ROOT}"}
    lean = subprocess.run([sys.executable, "-m", "sodkit", "predict", "--checkpoint",
                           checkpoint, str(photos), "--out", str(tmp_path / "lean"),
                           "--save", "mask,overlay"], env=env, capture_output=True, text=True)
    assert lean.returncode == 0, lean.stderr
    assert LEAN in lean.stderr and "onnxruntime fp32 (auto: the CPU)" in lean.stderr
    assert "wrote 6 masks and 6 overlays" in lean.stderr
    _assert_same(_masks(tmp_path / "lean" / "mask"), _masks(tmp_path / "full"))
    assert kind_of(tmp_path / "lean") == kind_of(tmp_path / "full") == "predict"
    torch_run = run_cli("predict", "--checkpoint", checkpoint, str(photos), "--out",
                        str(tmp_path / "torch"), "--runtime", "torch")
    assert torch_run.returncode == 0 and FULL in torch_run.stderr and "PyTorch" in torch_run.stderr
    _assert_same(_masks(tmp_path / "lean" / "mask"), _masks(tmp_path / "torch"))


def test_what_the_index_cannot_answer_takes_the_full_path(tmp_path, own_cache, run_cli):
    """A model file rewritten with other weights is not run from its old entry; a garbled
    index is no index, a damaged optimised graph no copy; --device cuda without a GPU is
    refused as before; a video goes the full path."""
    model, photos = write_tiny_checkpoint(tmp_path / "tiny.pt"), write_photos(tmp_path / "in", 2)
    base = ("predict", "--checkpoint", str(model), str(photos))
    assert FULL in run_cli(*base, "--out", str(tmp_path / "a")).stderr  # indexes it
    again = run_cli(*base, "--out", str(tmp_path / "b"))
    assert again.returncode == 0 and LEAN in again.stderr, again.stderr
    state = torch.load(model, weights_only=False)
    state["model"] = {k: v + 0.5 if v.is_floating_point() else v
                      for k, v in state["model"].items()}
    torch.save(state, model)  # the same path, other weights
    changed = run_cli(*base, "--out", str(tmp_path / "c"))
    assert changed.returncode == 0 and FULL in changed.stderr and "exported" in changed.stderr
    old, new = _masks(tmp_path / "b"), _masks(tmp_path / "c")
    assert any(not np.array_equal(old[k], new[k]) for k in old)
    (own_cache / FILE).write_text('{"not": [json')
    garbled = run_cli(*base, "--out", str(tmp_path / "d"))
    assert garbled.returncode == 0 and FULL in garbled.stderr, garbled.stderr
    _assert_same(_masks(tmp_path / "d"), _masks(tmp_path / "c"))
    assert LEAN in run_cli(*base, "--out", str(tmp_path / "e")).stderr  # indexed anew
    for copy in own_cache.glob("*.optimised.onnx"):  # a damaged optimised graph: opened around
        copy.write_bytes(b"not a graph")
    damaged = run_cli(*base, "--out", str(tmp_path / "e2"))
    assert damaged.returncode == 0 and LEAN in damaged.stderr
    _assert_same(_masks(tmp_path / "e2"), _masks(tmp_path / "c"))
    if not torch.cuda.is_available():
        cuda = run_cli(*base, "--out", str(tmp_path / "f"), "--device", "cuda")
        assert cuda.returncode == 2 and "cuda" in cuda.stderr.lower()
        assert cuda.stderr.count("\n") == 1 and not (tmp_path / "f").exists()
    from tests.test_video import write_clip

    clip = write_clip(tmp_path / "clip.mp4", count=3)
    video = run_cli("predict", "--checkpoint", str(model), str(clip), str(photos), "--out",
                    str(tmp_path / "g"))
    assert video.returncode == 0 and FULL in video.stderr, video.stderr


@pytest.mark.parametrize("name", list(PIPELINES))
@pytest.mark.parametrize("tta", [(), ("hflip",)])
def test_each_pipeline_in_numpy_is_the_torch_one(name, tta):
    """Each pipeline's input side, test-time augmentation and output side in numpy against
    the torch path's (:mod:`sodkit.inference.pipelines`, :func:`predict_scores`), on a small
    convolution for the network, at sides up and down: the inputs within float32 rounding
    (sodkit's antialiased resize equal to the uint8), the masks within 1/255 on >= 99.9% of
    pixels."""
    cfg = DataCfg(size=64, preprocess=name, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.3))
    transform, post = build_test_transform(cfg), postprocess_of(build_test_transform(cfg))
    lean = NumpyPipeline(name, 64, cfg.mean, cfg.std)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 1, 5, padding=2).eval()
    rng = np.random.default_rng(0)
    images = [cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), np.uint8), (0, 0), 1.5)
              for h, w in ((300, 410), (37, 61), (64, 64))]
    batch = torch.stack([transform(image) for image in images])
    inputs = np.stack([lean.preprocess(image) for image in images])
    assert np.abs(inputs - batch.numpy()).max() < 1e-5

    class Network(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"logits": conv(x) * 4, "coarse_logits": conv(x[..., ::4, ::4]) * 4}

    def run(x: np.ndarray) -> np.ndarray:
        out = Network()(torch.from_numpy(np.ascontiguousarray(x)))
        return (out["coarse_logits"] if lean.coarse else out["logits"]).detach().numpy()

    with torch.inference_mode():
        expected = predict_scores(Network(), batch, _OnCpu(), post, tta=tta)
        scores = lean.scores(run, inputs, tta)
    for i, image in enumerate(images):
        size = image.shape[:2]
        want = post.to_mask(expected[i : i + 1], size)
        _assert_same({"m": lean.to_mask(scores[i : i + 1], size)}, {"m": want})
        prob = lean.probability_map(scores[i : i + 1], size)
        assert np.abs(prob - post.probability_map(expected[i : i + 1], size).numpy()
                      ).max() < 2e-3


class _OnCpu:
    device = torch.device("cpu")

    def autocast(self, precision: str | None = None):  # noqa: ANN201
        import contextlib

        return contextlib.nullcontext()


def test_the_antialiased_resize_is_torchvision_s():
    """sodkit's input resize in numpy equals torchvision's on uint8, pixel for pixel,
    shrinking and enlarging."""
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2 import functional as F

    rng = np.random.default_rng(1)
    for h, w, side in ((300, 410, 64), (40, 48, 320), (97, 33, 96), (64, 64, 64)):
        image = rng.integers(0, 256, (h, w, 3), np.uint8)
        ref = F.resize(torch.from_numpy(image).permute(2, 0, 1), [side, side],
                       interpolation=InterpolationMode.BILINEAR, antialias=True)
        assert np.array_equal(resize_antialiased(image, side), ref.permute(1, 2, 0).numpy())
