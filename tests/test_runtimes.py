"""``--runtime torch|onnx|auto`` and ``--precision`` (issue 35 items 2-4): the masks of every
runtime equal PyTorch fp32's, the ONNX graph is exported once and never read stale, and what
cannot run here is one line before any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.runners.choice import Choice, choose
from sodkit.runners.onnx_cache import GraphRequest, cached_graph, graph_key
from sodkit.trained import read_trained

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def checkpoint(trained) -> str:
    return str(trained / "checkpoints" / "last.pt")


@pytest.fixture
def photos(data_root) -> Path:
    return data_root / "DUTS-TE" / "DUTS-TE-Image"


def _masks(folder: Path) -> dict[str, np.ndarray]:
    return {p.name: cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(folder.glob("*.png"))}


def _agreement(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """The share of pixels of ``a``'s masks within 1/255 of ``b``'s."""
    assert a.keys() == b.keys() and a
    within = sum(int((np.abs(a[k].astype(int) - b[k].astype(int)) <= 1).sum()) for k in a)
    return within / sum(m.size for m in a.values())


def _predict(run_cli, checkpoint: str, photos: Path, out: Path, *extra: str) -> str:
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), str(photos),
                   *extra)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_onnx_and_auto_masks_equal_pytorch_fp32(checkpoint, photos, tmp_path, run_cli):
    log = {}
    for runtime in ("torch", "onnx", "auto"):
        log[runtime] = _predict(run_cli, checkpoint, photos, tmp_path / runtime,
                                "--runtime", runtime, "--tta", "hflip")
    reference = _masks(tmp_path / "torch")
    assert "PyTorch fp32" in log["torch"] and "onnxruntime fp32" in log["onnx"]
    assert "onnxruntime fp32 (auto: the CPU)" in log["auto"]
    for runtime in ("onnx", "auto"):
        assert _agreement(_masks(tmp_path / runtime), reference) >= 0.999


def test_int8_runs_on_onnxruntime_close_to_fp32(checkpoint, photos, tmp_path, run_cli):
    _predict(run_cli, checkpoint, photos, tmp_path / "fp32", "--runtime", "torch")
    log = _predict(run_cli, checkpoint, photos, tmp_path / "int8", "--precision", "int8")
    assert "onnxruntime int8" in log
    a, b = _masks(tmp_path / "int8"), _masks(tmp_path / "fp32")
    mean = np.mean([np.abs(a[k].astype(float) - b[k]).mean() for k in a]) / 255
    assert mean < 0.05, mean  # quantized: close, not equal (docs/inference.md's table)


def test_graph_is_cached_and_a_changed_model_file_is_exported_anew(checkpoint, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setenv("SODKIT_ONNX_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "model.pt"
    model.write_bytes(Path(checkpoint).read_bytes())
    request = GraphRequest("auto", 64, False, "fp32")
    path, made = cached_graph(read_trained(model), request)
    assert made and path.is_file() and path.with_suffix(".json").is_file()
    again, made_again = cached_graph(read_trained(model), request)
    assert again == path and not made_again
    state = torch.load(model, weights_only=False)  # the same file, one weight changed
    name = next(k for k, v in state["model"].items() if v.is_floating_point())
    state["model"][name] = state["model"][name] + 1.0
    torch.save(state, model)
    changed, made_changed = cached_graph(read_trained(model), request)
    assert made_changed and changed != path and changed.is_file()
    assert not list((tmp_path / "cache").glob(".sodkit-tmp-*"))  # written whole
    file = read_trained(model)
    before = graph_key(file, request)[0]  # its digest now remembered with the file's stat
    size = model.stat().st_size
    with open(model, "r+b") as handle:  # one byte rewritten in place: the same size
        handle.seek(size // 2)
        byte = handle.read(1)[0]
        handle.seek(size // 2)
        handle.write(bytes([byte ^ 1]))
    assert model.stat().st_size == size and graph_key(file, request)[0] != before


def test_choices_refused_in_one_line():
    no_units: set[str] = set()
    with pytest.raises(Exception, match="no bf16 units"):
        choose("torch", "bf16", "cpu", flags=no_units)
    assert choose("auto", "bf16", "cpu", flags={"amx_bf16"}) == Choice(
        "torch", "bf16", "auto: bf16 runs on PyTorch")
    with pytest.raises(Exception, match="int8 runs on onnxruntime"):
        choose("torch", "int8", "cpu")
    with pytest.raises(Exception, match="fp16 runs on CUDA"):
        choose("auto", "fp16", "cpu")
    with pytest.raises(Exception, match="runs on PyTorch"):
        choose("onnx", "bf16", "cpu", flags={"avx512_bf16"})
    assert choose("auto", "fp32", "cuda").runtime == "torch"


def test_without_onnxruntime_onnx_is_an_install_hint_and_auto_uses_pytorch(
        checkpoint, photos, tmp_path):
    """The refusal comes from the arguments, before torch is imported (a torch that cannot
    be imported here); ``auto`` then predicts with PyTorch."""
    fake = tmp_path / "site"
    for name in ("onnxruntime", "no-torch/torch"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text("raise ImportError('not installed')\n")

    def sodkit(*args: str, torch: bool = True) -> subprocess.CompletedProcess:
        path = [str(fake), *([] if torch else [str(fake / "no-torch")]), str(ROOT)]
        return subprocess.run([sys.executable, "-m", "sodkit", "predict", "--checkpoint",
                               checkpoint, str(photos), *args], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
                              timeout=300)

    refused = sodkit("--out", str(tmp_path / "a"), "--runtime", "onnx", torch=False)
    assert refused.returncode != 0 and "pip install" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    auto = sodkit("--out", str(tmp_path / "b"))
    assert auto.returncode == 0, auto.stderr
    assert "onnxruntime is not installed" in auto.stderr and list((tmp_path / "b").glob("*.png"))


def test_api_runtime_onnx_equals_pytorch(checkpoint, photos):
    import sodkit

    images = sorted(photos.glob("*"))[:3]
    torch_maps = sodkit.load(checkpoint, device="cpu", runtime="torch").predict(images)
    onnx_model = sodkit.load(checkpoint, device="cpu", runtime="onnx")
    assert onnx_model.runtime == "onnxruntime fp32"
    for a, b in zip(onnx_model.predict(images), torch_maps, strict=True):
        assert a.shape == b.shape and np.mean(np.abs(a - b) <= 1 / 255) >= 0.999


def test_sodkit_test_on_onnxruntime_scores_as_pytorch(trained, data_root, tmp_path, run_cli):
    import json

    from tests.sod_fixtures import tiny_overrides

    results = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / runtime
        done = run_cli("test", str(ROOT / "configs" / "demo.yaml"),
                       *tiny_overrides(data_root, tmp_path / "runs", "t"), "--checkpoint",
                       str(trained / "checkpoints" / "last.pt"), "--out", str(out),
                       "--runtime", runtime)
        assert done.returncode == 0, done.stderr
        assert ("onnxruntime fp32" if runtime == "onnx" else "PyTorch fp32") in done.stderr
        results[runtime] = json.loads((out / "results.json").read_text())
    assert results["torch"].keys() == results["onnx"].keys() == {"DUTS-TE"}
    for key in ("MAE", "Smeasure"):
        assert abs(results["torch"]["DUTS-TE"][key] - results["onnx"]["DUTS-TE"][key]) < 2e-3


@pytest.mark.parametrize(("command", "policy"), [("predict", "PASSIVE"), ("train", None)])
def test_inference_commands_make_openmp_threads_sleep_while_they_wait(tmp_path, command,
                                                                      policy):
    """Set before torch loads (it reads the variable once): spinning threads made PyTorch's
    2-thread forward 2-16x slower beside a busy process (docs/inference.md)."""
    args = (["predict", "--checkpoint", str(tmp_path / "no.pt"), "--out", str(tmp_path / "o"),
             str(tmp_path / "no.jpg")] if command == "predict"
            else ["train", str(tmp_path / "no.yaml")])
    code = (f"import os; from sodkit.cli import main; main({args!r}); "
            f"print(os.environ.get('OMP_WAIT_POLICY'))")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip().splitlines()[-1] == str(policy), done.stderr


def test_served_model_on_onnxruntime_gives_pytorchs_scores(checkpoint, photos):
    from sodkit.serve.model import load_served

    images = sorted(photos.glob("*.jpg"))[:2]
    served = {runtime: load_served(checkpoint, False, "cpu", runtime=runtime)
              for runtime in ("torch", "onnx")}
    assert served["onnx"].describe()["runtime"] == "onnxruntime fp32"
    assert served["torch"].describe()["runtime"] == "PyTorch fp32"
    inputs = [served["torch"].prepare(p.read_bytes(), False).tensor for p in images]
    for a, b in zip(served["onnx"].forward(inputs), served["torch"].forward(inputs),
                    strict=True):
        assert float((a.sigmoid() - b.sigmoid()).abs().max()) < 1e-4


def test_auto_runs_pytorch_where_the_onnx_cache_cannot_be_written(checkpoint, photos,
                                                                   tmp_path, run_cli,
                                                                   monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("SODKIT_ONNX_CACHE", str(blocked / "onnx"))
    log = _predict(run_cli, checkpoint, photos, tmp_path / "auto")
    assert "PyTorch fp32 (auto: the ONNX cache cannot be written)" in log
    refused = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "onnx"),
                      str(photos), "--runtime", "onnx")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr


def test_onnxruntime_memory_probe_sees_its_arena(checkpoint):
    """The batch is chosen from what one image costs; PyTorch's probe (the heap after each
    PyTorch op) saw nothing of onnxruntime's arena, which made any batch look free."""
    import sodkit
    from sodkit.engine.predictor import probe_memory
    from sodkit.engine.runtime import OnDevice
    from sodkit.inference.pipelines import build_test_transform

    figures = {}
    for runtime in ("torch", "onnx"):
        model = sodkit.load(checkpoint, device="cpu", runtime=runtime, size=256)
        transform = build_test_transform(model.config.data, size=256)
        figures[runtime] = probe_memory(model.network, transform,
                                        OnDevice(torch.device("cpu")), 256)
    assert figures["onnx"] and figures["torch"] / 4 <= figures["onnx"] <= figures["torch"] * 4
