"""Papercuts of #33 item 9 on the model-file and training side: an ONNX export that cannot be
done says why in one line (not 9,490 lines of TorchScript graph first); a resumed run says in
the past tense what its start loaded; the Makefile checks that torch and torchvision work
together after installing them."""

from __future__ import annotations

import torch

from sodkit.config import Config, DataCfg, ModelCfg, to_dict
from sodkit.config.schema import BiRefNetCfg
from sodkit.network import build_network


def test_an_export_that_cannot_be_done_prints_only_the_reason(tmp_path, run_cli):
    """BiRefNet's deformable convolution has no ONNX operator; torch's exporter printed the
    whole TorchScript graph on stdout (its ONNX log is switched on by every export)."""
    options = BiRefNetCfg(mul_scl_ipt="", cxt_num=0, dec_ipt=False, squeeze_block="",
                          out_ref=False, ms_supervision=False, dec_att="ASPPDeformable")
    cfg = Config(data=DataCfg(size=32), model=ModelCfg(
        name="birefnet", backbone="test_resnet", decoder_channels=8, birefnet=options))
    checkpoint = tmp_path / "b.pt"
    torch.save({"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)},
               checkpoint)
    done = run_cli("export", "--checkpoint", str(checkpoint), "--onnx", str(tmp_path / "b.onnx"))
    assert done.returncode == 2 and done.stdout == "", done.stdout[:500]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "deform_conv2d, which ONNX export" in errors[0], done.stderr
    assert "graph(" not in done.stderr and not (tmp_path / "b.onnx").exists()
    done = run_cli("info", str(checkpoint))  # the exporter's log is off again afterwards
    assert "Torch IR" not in done.stdout + done.stderr
