"""``sodkit export --checkpoint PATH --onnx FILE``: ONNX export with an onnxruntime parity check."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from ._common import add_weights_argument, load_weights

HELP = "export a checkpoint's network (with its sigmoid) to ONNX and check it with onnxruntime"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="a .pt file written by sodkit train")
    parser.add_argument("--onnx", required=True, help="the .onnx file to write")
    parser.add_argument("--size", type=int, nargs=2, metavar=("H", "W"),
                        help="input size of the export (default: the training data.size)")
    parser.add_argument("--dynamic", action="store_true",
                        help="symbolic batch, height and width (checked at two more sizes)")
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset version")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --onnx file")
    add_weights_argument(parser)


def check_target(onnx: Path, checkpoint: Path, overwrite: bool) -> None:
    """The output is a new (or, with --overwrite, an earlier) .onnx file, never the input."""
    from ..errors import UserError
    from ..paths import check_not_input

    if onnx.suffix != ".onnx":
        raise UserError(f"--onnx {onnx}: the file name must end with .onnx")
    check_not_input(onnx, [checkpoint], "--onnx")
    if onnx.exists() and not overwrite:
        raise UserError(f"--onnx {onnx} exists; pass --overwrite to replace it")
    if not onnx.parent.is_dir():
        raise UserError(f"--onnx {onnx}: the folder {onnx.parent} does not exist")


def run(args: argparse.Namespace) -> int:
    from ..config.loader import stored_config
    from ..engine.export import TOLERANCE, SaliencyModel, check_parity, export_onnx, parity_sizes
    from ..errors import UserError
    from ..limits import MAX_INPUT_SIDE
    from ..network import build_network
    from ..torchfile import load_checkpoint

    onnx, checkpoint = Path(args.onnx), Path(args.checkpoint)
    check_target(onnx, checkpoint, args.overwrite)
    state = load_checkpoint(checkpoint)
    cfg = stored_config(state.get("config"), checkpoint)
    net = build_network(replace(cfg.model, pretrained=None, checkpointing="off"),
                        aux_outputs=False)
    which = load_weights(net, state, checkpoint, args.weights)
    size = tuple(args.size) if args.size else (cfg.data.size, cfg.data.size)
    if not 32 <= min(size) <= max(size) <= MAX_INPUT_SIDE:
        raise UserError(f"--size {size[0]} {size[1]}: from 32 to {MAX_INPUT_SIDE} pixels a side")
    model = SaliencyModel(net).eval()
    export_onnx(model, onnx, size, args.opset, args.dynamic)
    results = check_parity(model, onnx, parity_sizes(size, args.dynamic))
    for (h, w), diff in results:
        print(f"{h}x{w}: largest |onnxruntime - PyTorch| = {diff:.3e}")
    worst = max(diff for _, diff in results)
    if worst > TOLERANCE:
        raise UserError(f"{onnx}: the ONNX model differs from PyTorch by {worst:.3e} "
                        f"> {TOLERANCE:g}; do not deploy it")
    print(f"wrote {onnx} ({cfg.model.name}/{cfg.model.backbone}, {which} weights, opset "
          f"{args.opset}, {'dynamic' if args.dynamic else f'{size[0]}x{size[1]}'})")
    return 0
