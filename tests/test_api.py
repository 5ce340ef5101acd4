"""The Python API (#23 part 4), called as a user would: ``sodkit.load(...).predict(...)`` equals
``sodkit predict``'s PNGs / 255 to 1/255, ``cutout`` gives RGBA with the mask as alpha, and
``import sodkit`` does not import torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import sodkit
from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.foreground import blur_fusion_uint8
from sodkit.imageio import read_image, read_mask
from tests.conftest import ROOT


def test_import_sodkit_does_not_import_torch():
    code = ("import sys, sodkit; assert callable(sodkit.load) and sodkit.Model; "
            "print(sorted(m for m in ('torch', 'numpy', 'cv2') if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # sodkit.load resolves the API module (numpy) but loads no model: no torch yet
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "torch" not in proc.stdout and "cv2" not in proc.stdout
    bare = subprocess.run([sys.executable, "-c", "import sys, sodkit; print('torch' in "
                           "sys.modules)"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert bare.stdout.strip() == "False", bare.stderr


@pytest.fixture(scope="module")
def predicted(trained, data_root, tmp_path_factory) -> tuple[Path, Path, list[Path]]:
    """A model file of the trained run and ``sodkit predict``'s masks of the test images."""
    folder = tmp_path_factory.mktemp("api")
    model = folder / "model.safetensors"
    assert main(["export", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
                 "--model", str(model)]) == 0
    images = sorted((data_root / "DUTS-TE" / "DUTS-TE-Image").glob("*.jpg"))
    assert main(["predict", "--checkpoint", str(model), "--out", str(folder / "masks"),
                 "--workers", "0", *map(str, images)]) == 0
    return model, folder / "masks", images


def test_predict_equals_the_predict_command_to_one_level(trained, predicted):
    model_file, masks, images = predicted
    for source in (model_file, trained / "checkpoints" / "last.pt"):
        model = sodkit.load(source, device="cpu")
        assert model.weights == "model" and model.size == 64
        maps = model.predict(images, batch_size=4)
        assert isinstance(maps, list) and len(maps) == len(images)
        for path, prob in zip(images, maps, strict=True):
            png = read_mask(masks / f"{path.stem}.png").astype(np.float32) / 255
            assert prob.dtype == np.float32 and prob.shape == png.shape
            assert 0.0 <= prob.min() and prob.max() <= 1.0
            assert np.abs(prob - png).max() <= 1 / 255


def test_predict_takes_paths_pil_arrays_and_tensors(predicted):
    model_file, _, images = predicted
    model = sodkit.load(str(model_file), device="auto")
    path = images[0]
    rgb = read_image(path)
    expected = model.predict(path)
    assert isinstance(expected, np.ndarray) and expected.shape == rgb.shape[:2]
    chw = torch.from_numpy(rgb).permute(2, 0, 1)
    inputs = [str(path), Image.open(path), rgb, chw, chw.float() / 255]
    for got in model.predict(inputs, batch_size=2):  # PIL decodes the JPEG itself
        assert got.shape == expected.shape and np.abs(got - expected).max() <= 1 / 255
    same = model.predict([rgb, chw, chw / 255.0], batch_size=1)  # one batch size: exact
    assert all(np.array_equal(got, expected) for got in same)
    grey = rgb[:, :, 1]
    assert model.predict(grey).shape == grey.shape
    for bad in (rgb.astype(np.float32), chw[None], 3):
        with pytest.raises(UserError):
            model.predict(bad)
    if model.runtime.startswith("onnxruntime"):  # its precision is in its graph
        with pytest.raises(UserError, match="give the precision to sodkit.load"):
            model.predict(path, precision="bf16")
    if model.device.type == "cpu":
        with pytest.raises(UserError, match="CUDA only"):
            model.predict(path, precision="fp16")


def test_cutout_is_rgba_with_the_mask_as_alpha(predicted):
    model_file, masks, images = predicted
    model = sodkit.load(model_file, device="cpu")
    rgba = model.cutout(images[0])
    rgb = read_image(images[0])
    assert rgba.mode == "RGBA" and rgba.size == (rgb.shape[1], rgb.shape[0])
    array = np.asarray(rgba)
    assert np.array_equal(array[:, :, :3], rgb)
    assert np.array_equal(array[:, :, 3], read_mask(masks / f"{images[0].stem}.png"))
    white = model.cutout([images[0]], background="white")[0]
    assert white.mode == "RGB" and white.size == rgba.size
    clear = array[:, :, 3] == 0
    assert (np.asarray(white)[clear] == 255).all()
    fused = np.asarray(model.cutout(images[0], foreground="blur-fusion"))  # issue 38, item 4
    assert np.array_equal(fused[:, :, 3], array[:, :, 3])
    assert np.array_equal(fused[:, :, :3], blur_fusion_uint8(rgb, array[:, :, 3]))
    with pytest.raises(UserError, match="choose one of blur-fusion, ml, none"):
        model.cutout(images[0], foreground="fast")


def test_load_refuses_what_it_cannot_use(predicted, tmp_path):
    model_file, _, _ = predicted
    with pytest.raises(UserError, match="not found"):
        sodkit.load(tmp_path / "missing.safetensors")
    with pytest.raises(UserError, match="holding the model weights only"):
        sodkit.load(model_file, weights="ema")
    with pytest.raises(UserError, match="device"):
        sodkit.load(model_file, device="tpu:0")
