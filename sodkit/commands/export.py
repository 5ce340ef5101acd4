"""``sodkit export --checkpoint PATH --onnx FILE``: ONNX export with an onnxruntime parity check;
``--model FILE.safetensors``: a model file (weights, resolved config and provenance; see
:mod:`sodkit.model_file`)."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import int_in, user_path
from ..config.schema import MAX_SIZE
from ..trained import checkpoint_config, load_weights
from ._common import add_weights_argument

if TYPE_CHECKING:
    from ..outputs import OutputFolder

HELP = ("export a checkpoint's network to ONNX (with its sigmoid, checked with onnxruntime) or "
        "to a model file (.safetensors: weights, config and provenance, no training state)")

logger = logging.getLogger(__name__)
# below 11, ONNX has no Resize that matches bilinear interpolation (tested: 9 and 10 differ)
MIN_OPSET = 11


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="a .pt file written by sodkit train, or a model file")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--onnx", type=user_path, help="the .onnx file to write")
    target.add_argument("--model", type=user_path, metavar="FILE.safetensors",
                        help="the model file to write: the EMA weights when the checkpoint has "
                             "them (unless --weights model), its config and where they came from")
    parser.add_argument("--size", type=int_in(32, MAX_SIZE), nargs=2, metavar=("H", "W"),
                        help="input size of the export (default: the training data.size)")
    parser.add_argument("--dynamic", action="store_true",
                        help="symbolic batch, height and width (checked at two more sizes)")
    parser.add_argument("--opset", type=int_in(MIN_OPSET), default=17,
                        help=f"ONNX opset version (from {MIN_OPSET} to what torch supports)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output file that sodkit export did not write, "
                             "or that was changed since")
    add_weights_argument(parser)


def check_target(out: Path, checkpoint: Path, overwrite: bool, flag: str = "--onnx",
                 suffix: str = ".onnx") -> OutputFolder:
    """The output is a new file, or one sodkit export wrote and nobody changed since (or any,
    with --overwrite), never the input nor in another command's folder."""
    from ..errors import UserError
    from ..outputs import single_file

    if out.suffix != suffix:
        raise UserError(f"{flag} {out}: the file name must end with {suffix}")
    if not out.parent.is_dir():
        raise UserError(f"{flag} {out}: the folder {out.parent} does not exist")
    return single_file(out, "export", overwrite, flag, [checkpoint], flag="--overwrite")


def check_opset(opset: int) -> None:
    """The newest opset depends on the installed torch: asked before any work."""
    import torch.onnx

    from ..errors import UserError

    newest = getattr(getattr(torch.onnx, "_constants", None), "ONNX_MAX_OPSET", 20)
    if opset > newest:
        raise UserError(f"--opset {opset}: torch {torch.__version__} exports opsets "
                        f"{MIN_OPSET} to {newest}")


def export_model_file(args: argparse.Namespace) -> int:
    """``--model``: the checkpoint's weights (checked against its network, so that the file
    loads) with its resolved config and provenance, written whole."""
    from ..config import to_dict
    from ..errors import UserError
    from ..model_file import SUFFIX, from_checkpoint, model_file_bytes
    from ..network import build_network
    from ..torchfile import load_checkpoint

    if args.size or args.dynamic:
        raise UserError("--size and --dynamic apply to --onnx; a model file has no input size "
                        "of its own (its config's data.size is predict's default)")
    out, checkpoint = Path(args.model), Path(args.checkpoint)
    target = check_target(out, checkpoint, args.overwrite, "--model", SUFFIX)
    state = load_checkpoint(checkpoint, mmap=True)
    cfg = checkpoint_config(state, checkpoint)
    weights, provenance = from_checkpoint(state, checkpoint, args.weights)
    net = build_network(replace(cfg.model, pretrained=None, checkpointing="off"), initialise=False)
    load_weights(net, {**state, "model": weights, "ema": None, "model_file": False},
                 checkpoint, "model")
    target.write_bytes(out, model_file_bytes(weights, to_dict(cfg), provenance))
    print(f"wrote {out} ({cfg.model.name}/{cfg.model.backbone}, {provenance['weights']} weights "
          f"of {checkpoint.name}, {len(weights)} tensors, no training state)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.model is not None:
        return export_model_file(args)
    from ..engine.export import TOLERANCE, SaliencyModel, check_parity, export_onnx, parity_sizes
    from ..errors import UserError
    from ..network import build_network
    from ..torchfile import load_checkpoint

    onnx, checkpoint = Path(args.onnx), Path(args.checkpoint)
    target = check_target(onnx, checkpoint, args.overwrite)
    check_opset(args.opset)
    state = load_checkpoint(checkpoint, mmap=True)
    cfg = checkpoint_config(state, checkpoint)
    net = build_network(replace(cfg.model, pretrained=None, checkpointing="off"),
                        aux_outputs=False, initialise=False)
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
