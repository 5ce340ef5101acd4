"""``sodkit export --checkpoint PATH --onnx FILE``: ONNX export with an onnxruntime parity check."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.schema import MAX_SIZE
from ._common import add_weights_argument, checkpoint_config, int_in, load_weights, user_path

if TYPE_CHECKING:
    from ..outputs import OutputFolder

HELP = "export a checkpoint's network (with its sigmoid) to ONNX and check it with onnxruntime"

logger = logging.getLogger(__name__)
# below 11, ONNX has no Resize that matches bilinear interpolation (tested: 9 and 10 differ)
MIN_OPSET = 11


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True, help="a .pt file written by sodkit train")
    parser.add_argument("--onnx", required=True, type=user_path, help="the .onnx file to write")
    parser.add_argument("--size", type=int_in(32, MAX_SIZE), nargs=2, metavar=("H", "W"),
                        help="input size of the export (default: the training data.size)")
    parser.add_argument("--dynamic", action="store_true",
                        help="symbolic batch, height and width (checked at two more sizes)")
    parser.add_argument("--opset", type=int_in(MIN_OPSET), default=17,
                        help=f"ONNX opset version (from {MIN_OPSET} to what torch supports)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --onnx file that sodkit export did not write, "
                             "or that was changed since")
    add_weights_argument(parser)


def check_target(onnx: Path, checkpoint: Path, overwrite: bool) -> OutputFolder:
    """The output is a new .onnx file, or one sodkit export wrote and nobody changed since (or
    any, with --overwrite), never the input nor in another command's folder."""
    from ..errors import UserError
    from ..outputs import single_file

    if onnx.suffix != ".onnx":
        raise UserError(f"--onnx {onnx}: the file name must end with .onnx")
    if not onnx.parent.is_dir():
        raise UserError(f"--onnx {onnx}: the folder {onnx.parent} does not exist")
    return single_file(onnx, "export", overwrite, "--onnx", [checkpoint], flag="--overwrite")


def check_opset(opset: int) -> None:
    """The newest opset depends on the installed torch: asked before any work."""
    import torch.onnx

    from ..errors import UserError

    newest = getattr(getattr(torch.onnx, "_constants", None), "ONNX_MAX_OPSET", 20)
    if opset > newest:
        raise UserError(f"--opset {opset}: torch {torch.__version__} exports opsets "
                        f"{MIN_OPSET} to {newest}")


def run(args: argparse.Namespace) -> int:
    from ..engine.export import TOLERANCE, SaliencyModel, check_parity, export_onnx, parity_sizes
    from ..errors import UserError
    from ..network import build_network
    from ..torchfile import load_checkpoint

    onnx, checkpoint = Path(args.onnx), Path(args.checkpoint)
    target = check_target(onnx, checkpoint, args.overwrite)
    check_opset(args.opset)
    state = load_checkpoint(checkpoint)
    cfg = checkpoint_config(state, checkpoint)
    net = build_network(replace(cfg.model, pretrained=None, checkpointing="off"),
                        aux_outputs=False)
    which = load_weights(net, state, checkpoint, args.weights)
    # both bounded: --size by its type, the stored data.size by the config's range
    size = tuple(args.size) if args.size else (cfg.data.size, cfg.data.size)
    model = SaliencyModel(net).eval()
    target.write_with(onnx, lambda tmp: export_onnx(model, tmp, size, args.opset, args.dynamic))
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
