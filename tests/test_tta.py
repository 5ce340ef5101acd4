"""Test-time augmentation: hflip is the mean of the plain and the mirrored pass."""

from __future__ import annotations

import pytest
import torch

from sodkit.config import ModelCfg, RuntimeCfg
from sodkit.engine.runtime import Runtime
from sodkit.inference.forward import predict_probabilities
from sodkit.network import build_network


def test_hflip_is_the_mean_of_the_two_passes() -> None:
    torch.manual_seed(0)
    model = build_network(ModelCfg(name="fpn", backbone="resnet18", decoder_channels=8)).eval()
    runtime = Runtime(RuntimeCfg(device="cpu"))
    images = torch.randn(2, 3, 64, 72)
    with torch.no_grad():
        plain = torch.sigmoid(model(images)["logits"])
        mirrored = torch.sigmoid(model(images.flip(-1))["logits"]).flip(-1)
        tta = predict_probabilities(model, images, runtime, tta=["hflip"])
        none = predict_probabilities(model, images, runtime)
    torch.testing.assert_close(tta, (plain + mirrored) / 2)
    torch.testing.assert_close(none, plain)
    assert not torch.allclose(tta, plain)  # the mirrored pass really counts
    with pytest.raises(ValueError, match="eval.tta"):
        predict_probabilities(model, images, runtime, tta=["vflip"])
    runtime.close()
