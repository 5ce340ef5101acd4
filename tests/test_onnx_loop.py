"""``benchmarks/onnx_loop.py``, the bare onnxruntime loop ``sodkit predict`` is measured against:
it writes one mask per photo, at the photo's size, equal to the exported network's
probabilities on the photo as it resizes and normalises it (RGB order, ImageNet statistics)."""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import torch

from sodkit.config import ModelCfg
from sodkit.engine.export import SaliencyModel, export_onnx
from sodkit.network import build_network

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from onnx_loop import IMAGENET_MEAN, IMAGENET_STD, main  # noqa: E402


def test_the_loop_writes_each_photos_mask_at_its_size(tmp_path, capsys) -> None:
    torch.manual_seed(0)
    net = build_network(ModelCfg(name="fpn", backbone="test_resnet", decoder_channels=8),
                        aux_outputs=False)
    with torch.no_grad():
        net.heads[0].weight.mul_(50)  # probabilities spread over (0, 1)
    model = SaliencyModel(net).eval()
    export_onnx(model, tmp_path / "m.onnx", (64, 64), 17, dynamic=False)
    photos = tmp_path / "photos"
    photos.mkdir()
    rng = np.random.default_rng(0)
    sizes = {"a": (90, 70), "b": (40, 50)}  # one shrunk, one enlarged
    for stem, (h, w) in sizes.items():
        cv2.imwrite(str(photos / f"{stem}.png"), rng.integers(0, 256, (h, w, 3), np.uint8))
    (photos / "notes.txt").write_text("not a photo")
    assert main([str(tmp_path / "m.onnx"), str(photos), "--out", str(tmp_path / "masks"),
                 "--threads", "1"]) == 0
    assert capsys.readouterr().out.startswith("2 images in ")
    for stem, (h, w) in sizes.items():
        mask = cv2.imread(str(tmp_path / "masks" / f"{stem}.png"), cv2.IMREAD_UNCHANGED)
        assert mask.shape == (h, w) and mask.dtype == np.uint8 and mask.std() > 10
        rgb = cv2.cvtColor(cv2.imread(str(photos / f"{stem}.png")), cv2.COLOR_BGR2RGB)
        shrink = h * w > 64 * 64
        x = cv2.resize(rgb, (64, 64), interpolation=cv2.INTER_AREA if shrink else
                       cv2.INTER_LINEAR).astype(np.float32) / 255
        x = (x - np.float32(IMAGENET_MEAN)) / np.float32(IMAGENET_STD)
        with torch.no_grad():
            prob = model(torch.from_numpy(x.transpose(2, 0, 1).copy())[None])[0, 0].numpy()
        expected = cv2.resize(prob, (w, h), interpolation=cv2.INTER_LINEAR) * 255
        assert np.abs(mask - expected).max() <= 0.5 + 1e-3  # rounded to the nearest level
