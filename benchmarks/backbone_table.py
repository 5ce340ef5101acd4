"""The table of backbone families in docs/backbones.md: for each family on the demo recipe
(fpn, random init), parameters and FLOPs at 352 px from ``sodkit info``, how many encoder blocks
``model.checkpointing: backbone`` checkpoints, and whether ONNX export (static 352 px, opset 17,
TorchScript exporter as ``sodkit export``) keeps parity with onnxruntime (max |diff| <= 1e-4).

    PYTHONPATH=$PWD python benchmarks/backbone_table.py [FAMILY ...]
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import torch

from sodkit.cli import main
from sodkit.config import load_config
from sodkit.engine.export import TOLERANCE, SaliencyModel, check_parity, export_onnx
from sodkit.module.grad_checkpoint import is_checkpointed
from sodkit.network import build_network

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"
FAMILIES = ["resnet18", "convnext_atto", "efficientnet_b0", "swin_tiny_patch4_window7_224",
            "pvt_v2_b0", "vit_small_patch14_dinov2", "vit_small_patch16_224",
            "samvit_base_patch16"]
SIZE = 352


def info(backbone: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["info", str(DEMO), f"model.backbone={backbone}", "model.pretrained=null",
                     f"data.size={SIZE}", "--json"])
    assert code == 0, backbone
    return json.loads(out.getvalue())


def checkpointed_blocks(backbone: str) -> int:
    cfg = load_config(DEMO, [f"model.backbone={backbone}", "model.pretrained=null",
                             "model.checkpointing=backbone"])
    model = build_network(cfg.model)
    return sum(is_checkpointed(m) for m in model.backbone.body.modules())


def onnx_parity(backbone: str) -> str:
    cfg = load_config(DEMO, [f"model.backbone={backbone}", "model.pretrained=null"])
    torch.manual_seed(0)
    model = SaliencyModel(build_network(cfg.model, aux_outputs=False)).eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the exporter's graph dumps
                export_onnx(model, path, (SIZE, SIZE), 17, dynamic=False)
            (_, diff), = check_parity(model, path, [(SIZE, SIZE)])
        except Exception as exc:  # noqa: BLE001 - the table reports why
            return f"no ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"
    return f"yes (max diff {diff:.1e})" if diff <= TOLERANCE else f"no (max diff {diff:.1e})"


def main_table(families: list[str]) -> None:
    for backbone in families:
        row = info(backbone)
        p = row["parameters"]["total"] / 1e6
        flops = row["flops"] / 1e9
        print(f"| `{backbone}` | {row['strides']} | {p:.2f} M | {flops:.2f} G | "
              f"{checkpointed_blocks(backbone)} blocks | {onnx_parity(backbone)} |", flush=True)


if __name__ == "__main__":
    main_table(sys.argv[1:] or FAMILIES)
