"""A checkpoint of another network given to ``train --resume`` is one line naming the model keys
that differ, not torch's dump of every tensor that does not fit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sodkit.config import load_config
from sodkit.engine.resume import load_model_state
from sodkit.errors import UserError
from sodkit.network import build_network
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")


def test_a_checkpoint_of_another_width_is_one_line(trained, data_root, tmp_path):
    checkpoint = trained / "checkpoints" / "last.pt"
    state = torch.load(checkpoint, weights_only=True)
    same = load_config(DEMO, tiny_overrides(data_root, tmp_path, "t"))
    load_model_state(build_network(same.model), state, same, checkpoint)  # fits: no error
    wider = load_config(DEMO, [*tiny_overrides(data_root, tmp_path, "t"),
                               "model.decoder_channels=32"])
    with pytest.raises(UserError) as info:
        load_model_state(build_network(wider.model), state, wider, checkpoint)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    assert message.startswith(f"{checkpoint} was trained with another network "
                              f"(model.decoder_channels 16 -> 32): "), message
    assert "tensors of another shape (e.g. " in message and "0 missing" in message
