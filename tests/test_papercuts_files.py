"""Papercuts of #33 item 9 on the model-file and training side: an ONNX export that cannot be
done says why in one line (not 9,490 lines of TorchScript graph first); the Makefile checks that
torch and torchvision work together after installing them. (A resumed run's past tense:
tests/test_finetune.py; s/img below 1 img/s: tests/test_progress.py.)"""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from sodkit.config import Config, DataCfg, ModelCfg, to_dict
from sodkit.config.schema import BiRefNetCfg
from sodkit.network import build_network
from tests.conftest import ROOT


def test_an_export_that_cannot_be_done_prints_only_the_reason(tmp_path, run_cli):
    """BiRefNet's deformable convolution needs opset 16 (GridSample) at least; torch's exporter
    printed the whole TorchScript graph on stdout before a refusal (its ONNX log is switched on
    by every export: tests/test_export.py has the refusal by torch itself)."""
    options = BiRefNetCfg(mul_scl_ipt="", cxt_num=0, dec_ipt=False, squeeze_block="",
                          out_ref=False, ms_supervision=False, dec_att="ASPPDeformable")
    cfg = Config(data=DataCfg(size=32), model=ModelCfg(
        name="birefnet", backbone="test_resnet", decoder_channels=8, birefnet=options))
    checkpoint = tmp_path / "b.pt"
    torch.save({"model": build_network(cfg.model).state_dict(), "config": to_dict(cfg)},
               checkpoint)
    done = run_cli("export", "--checkpoint", str(checkpoint), "--onnx", str(tmp_path / "b.onnx"),
                   "--opset", "15")
    assert done.returncode == 2 and done.stdout == "", done.stdout[:500]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "need --opset 16 or newer" in errors[0], done.stderr
    assert "graph(" not in done.stderr and not (tmp_path / "b.onnx").exists()
    done = run_cli("info", str(checkpoint))  # the exporter's log is off again afterwards
    assert "Torch IR" not in done.stdout + done.stderr


def test_the_install_says_what_to_do_when_torchvision_does_not_fit_torch(tmp_path):
    """A torchvision of another torch build imports, but its operators are missing: the first
    command ended in `RuntimeError: operator torchvision::nms does not exist`. make's install
    ends with sodkit.install_check, which names both and what to do, in one line."""
    fake = tmp_path / "torchvision"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "__version__ = '0.99.0+cpu'\n"
        "raise RuntimeError('operator torchvision::nms does not exist')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "sodkit.install_check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "Traceback" not in done.stderr, lines
    assert "torchvision ? does not work with torch" in lines[0]
    assert "operator torchvision::nms does not exist" in lines[0]
    assert "rm -rf .venv && make demo TORCH_INDEX=" in lines[0]
    from sodkit.install_check import problem

    assert problem() is None  # this environment's torch and torchvision work together
    plan = subprocess.run(["make", "-n", f"VENV={tmp_path / 'venv'}", "demo"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60).stdout.splitlines()
    install = [i for i, line in enumerate(plan) if "pip install" in line and "-e ." in line]
    check = [i for i, line in enumerate(plan) if "-m sodkit.install_check" in line]
    assert install and check and install[-1] < check[0], plan  # after the install, before use
