"""``sodkit export --checkpoint PATH --onnx FILE``: ONNX export with an onnxruntime parity check;
``--model FILE.safetensors``: a model file (weights, resolved config and provenance; see
:mod:`sodkit.model_file`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import int_in, user_path
from ..config.schema import MAX_SIZE
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
    parser.add_argument("--opset", type=int_in(MIN_OPSET),
                        help=f"ONNX opset version (from {MIN_OPSET} to what torch supports; "
                             f"default 17, or 19 for deformable convolutions where the installed "
                             f"onnxruntime runs ONNX's DeformConv)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output file that sodkit export did not write, "
                             "or that was changed since")
    add_weights_argument(parser)


def check_target(out: Path, checkpoint: Path, overwrite: bool, flag: str = "--onnx",
                 suffix: str = ".onnx") -> OutputFolder:
    """The output is a new file, or one sodkit export wrote and nobody changed since (or any,
    with --overwrite), never the input nor in another command's folder; the checkpoint is a
    file. Names and paths only: before torch is imported or anything is read."""
    from ..errors import UserError
    from ..outputs import single_file

    if checkpoint.is_dir():
        raise UserError(f"--checkpoint {checkpoint} is a folder; give the file, e.g. "
                        f"{checkpoint / 'checkpoints' / 'last.pt'}")
    if not checkpoint.is_file():
        raise UserError(f"--checkpoint: file not found: {checkpoint}")
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
    from ..errors import UserError
    from ..model_file import SUFFIX

    if args.size or args.dynamic:
        raise UserError("--size and --dynamic apply to --onnx; a model file has no input size "
                        "of its own (its config's data.size is predict's default)")
    out, checkpoint = Path(args.model), Path(args.checkpoint)
    target = check_target(out, checkpoint, args.overwrite, "--model", SUFFIX)
    from ..config import to_dict
    from ..config.stored import shareable_config
    from ..model_file import from_checkpoint, model_file_bytes
    from ..progress import Progress
    from ..trained import load_trained, read_trained

    stored = read_trained(checkpoint)
    state, cfg = stored.state, stored.config
    logger.info("export: %s (%s/%s) -> %s: its weights checked against the network, then "
                "written with its config", checkpoint, cfg.model.name, cfg.model.backbone, out)
    with Progress(3, "export", unit="stage", summary=True) as progress:
        weights, provenance = from_checkpoint(state, checkpoint, args.weights)
        progress.update(postfix=f"{provenance['weights']} weights, sha256 of the source")
        load_trained(stored, weights=args.weights, checkpointing="off")  # the same weights
        progress.update(postfix="every tensor fits the network")
        # the run's config as it was (data, output folder and all: a record of the training),
        # without free-form entries that name files or hosts (sodkit/config/stored.py)
        config = {**to_dict(cfg), **shareable_config(state["config"], checkpoint)}
        target.write_bytes(out, model_file_bytes(weights, config, provenance))
        progress.update(postfix=f"wrote {out.name}")
    print(f"wrote {out} ({cfg.model.name}/{cfg.model.backbone}, {provenance['weights']} weights "
          f"of {checkpoint.name}, {len(weights)} tensors, no training state)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.model is not None:
        return export_model_file(args)
    onnx, checkpoint = Path(args.onnx), Path(args.checkpoint)
    target = check_target(onnx, checkpoint, args.overwrite)  # before torch's import
    from ..engine.export import (
        TOLERANCE,
        SaliencyModel,
        check_parity,
        default_opset,
        export_onnx,
        parity_sizes,
    )
    from ..errors import UserError
    from ..progress import Progress
    from ..text import plural
    from ..trained import load_trained, read_trained

    if args.opset is not None:
        check_opset(args.opset)
    stored = read_trained(checkpoint)
    cfg = stored.config
    # both bounded: --size by its type, the stored data.size by the config's range
    size = tuple(args.size) if args.size else (cfg.data.size, cfg.data.size)
    sizes = parity_sizes(size, args.dynamic)
    logger.info("export: %s (%s/%s) -> %s: the network built, exported at %dx%d (opset %s%s), "
                "then onnxruntime checked against PyTorch at %s", checkpoint, cfg.model.name,
                cfg.model.backbone, onnx, size[0], size[1], args.opset or "by default",
                ", dynamic" if args.dynamic else "", plural(len(sizes), "size"))
    with Progress(3 + len(sizes), "export", unit="stage", summary=True) as progress:
        trained = load_trained(stored, weights=args.weights, aux_outputs=False,
                               checkpointing="off")
        which = trained.weights
        progress.update(postfix="network built")
        model = SaliencyModel(trained.network).eval()
        opset = args.opset or default_opset(model)
        target.write_with(onnx, lambda tmp: export_onnx(model, tmp, size, opset, args.dynamic))
        progress.update(postfix=f"wrote {onnx.name}")
        results = check_parity(model, onnx, sizes,
                               done=lambda what: progress.update(postfix=what))
    for (h, w), diff in results:
        print(f"{h}x{w}: largest |onnxruntime - PyTorch| = {diff:.3e}")
    worst = max(diff for _, diff in results)
    if worst > TOLERANCE:
        raise UserError(f"{onnx}: the ONNX model differs from PyTorch by {worst:.3e} "
                        f"> {TOLERANCE:g}; do not deploy it")
    print(f"wrote {onnx} ({cfg.model.name}/{cfg.model.backbone}, {which} weights, opset "
          f"{opset}, {'dynamic' if args.dynamic else f'{size[0]}x{size[1]}'})")
    return 0
