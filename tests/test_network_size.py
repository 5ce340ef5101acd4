"""What a config may build is bounded by its product, not only setting by setting (#32 item 5):
a stored `num_classes` of millions made timm build an 11 GB classifier head (dropped at once by
a features-only model) before anything else ran. The network is measured on the meta device
first, and a build over SODKIT_MAX_NETWORK_MB is one line naming the file, the largest tensor
and what to lower, within a memory cap."""

from __future__ import annotations

import pytest
import torch

from sodkit.config import Config, DataCfg, ModelCfg, to_dict
from sodkit.config.loader import ConfigError
from sodkit.network import build_network
from tests import hostile_files

HUGE = {"num_classes": 20_000_000}  # a head of 20M x 512 floats: 41 GB


def test_a_network_over_the_bound_is_refused_before_it_is_built(monkeypatch):
    with pytest.raises(ConfigError) as caught:
        build_network(ModelCfg(backbone="resnet18", backbone_kwargs=HUGE))
    message = str(caught.value)
    assert "num_classes=20000000" in message and "[20000000, 512]" in message
    assert "SODKIT_MAX_NETWORK_MB=16384" in message and "Lower" in message
    monkeypatch.setenv("SODKIT_MAX_NETWORK_MB", "1")  # the bound is a setting
    with pytest.raises(ConfigError, match="SODKIT_MAX_NETWORK_MB=1;"):
        build_network(ModelCfg(backbone="test_resnet", decoder_channels=8))
    monkeypatch.setenv("SODKIT_MAX_NETWORK_MB", "lots")
    with pytest.raises(Exception, match="SODKIT_MAX_NETWORK_MB='lots'"):
        build_network(ModelCfg(backbone="test_resnet", decoder_channels=8))


def test_a_checkpoint_asking_for_a_huge_head_is_one_line_within_a_memory_cap(tmp_path,
                                                                             run_cli):
    cfg = Config(data=DataCfg(size=32), model=ModelCfg(backbone="resnet18", decoder_channels=8))
    state = {"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)}
    state["config"]["model"]["backbone_kwargs"] = dict(HUGE)
    checkpoint = tmp_path / "huge_head.pt"
    torch.save(state, checkpoint)
    image = tmp_path / "x.png"
    image.write_bytes(hostile_files.zero_png(40, 40))
    args = ["predict", "--checkpoint", str(checkpoint), "--out", str(tmp_path / "o"), str(image)]
    proc = hostile_files.run_capped(args, tmp_path, preload=("torch", "timm"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert str(checkpoint) in lines[-1] and "num_classes=20000000" in lines[-1], lines
    assert not (tmp_path / "o").exists()
    # export reads the stored config through the same checkpoint_config: in this process
    done = run_cli("export", "--checkpoint", str(checkpoint), "--onnx", str(tmp_path / "m.onnx"))
    assert done.returncode == 2 and "num_classes=20000000" in done.stderr.splitlines()[-1]
    assert not (tmp_path / "m.onnx").exists()
