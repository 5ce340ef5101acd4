"""``sodkit predict``: saliency masks for image files and folders with a trained checkpoint.

Inputs are never outputs: ``--out`` may not be, hold, or lie inside an input folder. An existing
mask is replaced only when ``sodkit predict`` wrote it and nobody changed it since, or with
``--force`` (which still replaces only the ``<stem>.png`` files it writes, and never writes into
another command's folder): see :mod:`sodkit.outputs`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import float_in, int_in, user_path
from ..config.schema import MAX_SIZE, MIN_SIZE
from ..trained import checkpoint_config, load_weights
from ._common import add_model_arguments, add_weights_argument, resolve_model_argument

if TYPE_CHECKING:
    from ..cutout import Rendering

HELP = "predict saliency masks for images (files or folders), each at its own resolution"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="image files and/or folders")
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, type=user_path,
                        help="folder for the <stem>.png masks (new, empty, or sodkit's own)")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that already holds files, replacing masks of "
                             "the same names that sodkit predict did not write or that were "
                             "changed since (nothing else is touched)")
    parser.add_argument("--size", type=int_in(MIN_SIZE, MAX_SIZE),
                        help="network input side (default: the training size)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    add_weights_argument(parser)
    parser.add_argument("--tta", nargs="*", choices=["hflip"], default=None,
                        help="test-time augmentation (default: the checkpoint's eval.tta; "
                             "--tta alone: none)")
    parser.add_argument("--batch-size", type=int_in(1, 1024), default=8)
    parser.add_argument("--workers", type=int_in(0), default=2, help="image decoding processes")
    parser.add_argument("--skip-bad", action="store_true",
                        help="leave out the images that cannot be read (truncated, corrupt, not "
                             "an image), list them and write the others' masks (default: such "
                             "an image stops the command)")
    add_save_arguments(parser)


def add_save_arguments(parser: argparse.ArgumentParser) -> None:
    """``--save`` and its options (what each ``<stem>.png`` holds: :mod:`sodkit.cutout`)."""
    from ..cutout import MODES

    parser.add_argument("--save", choices=MODES, default="mask",
                        help="mask: uint8 map (default); soft: 16-bit map; binary: 0/255 at "
                             "--threshold; cutout: RGBA, the mask as alpha; overlay: the image "
                             "with the object tinted")
    parser.add_argument("--threshold", type=float_in(0.0, 1.0), default=0.5,
                        help="--save binary: foreground where the probability is >= this")
    parser.add_argument("--background", metavar="COLOR",
                        help="--save cutout: a solid background (white, #RRGGBB, R,G,B) "
                             "instead of transparency")
    parser.add_argument("--tint", metavar="COLOR", default="red", help="--save overlay: colour")
    parser.add_argument("--foreground", choices=("blur-fusion", "ml", "none"), default=None,
                        help="--save cutout: estimate the object's colours on soft edges (no "
                             "halo of the old background): blur-fusion (BiRefNet's fast "
                             "estimate), ml (pymatting's, needs sodkit[cutout]), none (default)")
    parser.add_argument("--estimate-foreground", action="store_true",
                        help="--save cutout: the same as --foreground ml")


def rendering_of(args: argparse.Namespace) -> Rendering | None:
    """What ``--save`` asks for, checked before any work; None for the plain mask."""
    from ..cutout import Rendering, parse_color
    from ..errors import UserError

    foreground = args.foreground or ("ml" if args.estimate_foreground else "none")
    if args.estimate_foreground and args.foreground not in (None, "ml"):
        raise UserError(f"--estimate-foreground means --foreground ml; it cannot go with "
                        f"--foreground {args.foreground}")
    if args.save != "cutout" and (args.background or foreground != "none"):
        raise UserError("--background and --foreground / --estimate-foreground apply to "
                        "--save cutout")
    rendering = Rendering(args.save, args.threshold,
                          parse_color(args.background) if args.background else None,
                          parse_color(args.tint), foreground)
    return None if args.save == "mask" else rendering


def check_out(out: Path, inputs: list[str], paths: list[Path], force: bool) -> None:
    """Before any work: ``--out`` is a folder apart from the inputs, of ``sodkit predict``'s
    own (or the user's, with ``--force``), and replaces no mask it may not."""
    from ..outputs import OutputFolder, check_claim, kind_of
    from ..paths import check_not_input

    check_not_input(out, [Path(p) for p in inputs] + paths)
    check_claim(out, "predict", force)
    if out.is_dir():
        kind = kind_of(out)
        masks = OutputFolder(out, kind, force, record=kind is not None)
        masks.check(out / f"{path.stem}.png" for path in paths)


def run(args: argparse.Namespace) -> int:
    from ..config import RuntimeCfg
    from ..data import build_test_transform
    from ..engine.predictor import ImageBatches, collect_inputs, predict_files
    from ..engine.runtime import Runtime
    from ..network import build_network
    from ..outputs import claim
    from ..resources import cap_workers, keep_freed_memory
    from ..torchfile import load_checkpoint

    rendering = rendering_of(args)
    keep_freed_memory()
    paths = collect_inputs(args.inputs)
    out = Path(args.out)
    check_out(out, args.inputs, paths, args.force)
    resolve_model_argument(args)  # --model NAME: fetched and converted once, then cached
    state = load_checkpoint(args.checkpoint, mmap=True)
    cfg = checkpoint_config(state, Path(args.checkpoint))
    runtime = Runtime(RuntimeCfg(device=args.device, precision="fp32", seed=cfg.runtime.seed))
    transform = build_test_transform(cfg.data, size=args.size)
    workers = cap_workers(args.workers, len(paths), "--workers")
    # decoding starts now: the workers read the first batches while the network is built
    images = ImageBatches(paths, transform, runtime, args.batch_size, workers,
                          rendering is not None and rendering.needs_image, args.skip_bad)
    try:
        model = build_network(replace(cfg.model, pretrained=None), initialise=False)
        load_weights(model, state, Path(args.checkpoint), args.weights)  # all of them
        model = model.to(runtime.device)
        folder = claim(out, "predict", force=args.force) if runtime.is_main else None
        runtime.barrier()
        predict_files(model, paths, transform, runtime, folder or out,
                      batch_size=args.batch_size, num_workers=workers,
                      tta=cfg.eval.tta if args.tta is None else args.tta,
                      rendering=rendering, skip_bad=args.skip_bad, images=images)
    finally:
        images.close()
        runtime.close()
    return 0
