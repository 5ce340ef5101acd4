"""``sodkit predict``: saliency masks (and cut-outs, overlays, ...) for image files and folders
with a trained checkpoint or a model file.

Inputs are never outputs: ``--out`` may not be, hold, or lie inside an input folder. An existing
mask is replaced only when ``sodkit predict`` wrote it and nobody changed it since, or with
``--force`` (which still replaces only the ``<stem>.png`` files it writes, and never writes into
another command's folder): see :mod:`sodkit.outputs`. Where each output goes (``--out DIR``, a
folder per ``--save`` kind, ``--out NAME.png`` for one image) and what is checked before the
first forward pass: :mod:`sodkit.predict_plan`; videos: :mod:`sodkit.commands.predict_videos`.
The first line says what it will do (images, videos, network, size, batch, threads); progress
follows (a bar on a terminal, a line every 5 s in a log). The batch:
:mod:`sodkit.engine.batch_memory`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import float_in, int_in, user_path
from ..config.schema import MAX_SIZE, MIN_SIZE
from ._common import (
    add_model_arguments,
    add_runtime_arguments,
    add_weights_argument,
    resolve_model_argument,
)
from .predict_lean import DEFAULT_WORKERS

if TYPE_CHECKING:
    from ..engine.batch_memory import BatchChoice
    from ..inference.render import Rendering
    from ..predict_plan import Targets
    from .predict_videos import Clip

logger = logging.getLogger(__name__)

HELP = ("predict saliency masks for images (files or folders), each at its own resolution, "
        "and for video files (a mask video of the same frames and rate)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="image files, folders of images, and/or video files (.mp4, .mkv, "
                             ".avi, .mov, ...: docs/video.md)")
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, type=user_path,
                        help="folder for the <stem>.png outputs (new, empty, or sodkit's own); "
                             "for one image, the output file itself (NAME.png)")
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
    parser.add_argument("--batch-size", type=int_in(1, 1024),
                        help="images per forward pass (default: chosen from the input size and "
                             "the memory available, at most 8; the first line says it)")
    parser.add_argument("--workers", type=int_in(0),
                        help=f"image decoding processes (default: {DEFAULT_WORKERS}, at most one "
                             f"an image)")
    parser.add_argument("--threads", type=int_in(1, 256),
                        help="compute threads of the forward (default: the cores this process "
                             "may use, OMP_NUM_THREADS when set; docs/inference.md)")
    add_runtime_arguments(parser)
    parser.add_argument("--skip-bad", action="store_true",
                        help="leave out the images that cannot be read (truncated, corrupt, not "
                             "an image), list them and write the others' masks (default: such "
                             "an image stops the command)")
    add_save_arguments(parser)


def add_save_arguments(parser: argparse.ArgumentParser) -> None:
    """``--save`` and its options (what each ``<stem>.png`` holds:
    :mod:`sodkit.inference.render`)."""
    parser.add_argument("--save", action="append", type=save_kinds, metavar="KIND[,KIND]",
                        help="mask: uint8 map (default); soft: 16-bit map; binary: 0/255 at "
                             "--threshold; cutout: RGBA, the mask as alpha; overlay: the image "
                             "with the object tinted. Several (--save mask --save cutout, or "
                             "--save mask,cutout) come from one forward pass, each kind in its "
                             "own folder, DIR/<kind>/ (or NAME.<kind>.png)")
    parser.add_argument("--threshold", type=float_in(0.0, 1.0), default=0.5,
                        help="--save binary: foreground where the probability is >= this")
    parser.add_argument("--background", metavar="COLOR|blur|FILE",
                        help="--save cutout: composite onto a colour (white, #RRGGBB, R,G,B), "
                             "the photo blurred (blur), or an image file (scaled to cover the "
                             "photo) instead of transparency")
    parser.add_argument("--tint", metavar="COLOR", default="red", help="--save overlay: colour")
    parser.add_argument("--foreground", choices=("blur-fusion", "ml", "none"), default=None,
                        help="--save cutout: estimate the object's colours on soft edges (no "
                             "halo of the old background): blur-fusion (BiRefNet's fast "
                             "estimate), ml (pymatting's, needs sodkit[cutout]), none (default)")
    parser.add_argument("--estimate-foreground", action="store_true",
                        help="--save cutout: the same as --foreground ml")


def save_kinds(text: str) -> list[str]:
    """An argparse ``type``: ``--save`` kinds, comma-separated."""
    from ..inference.render import MODES

    kinds = [kind.strip() for kind in text.split(",")]
    bad = [kind for kind in kinds if kind not in MODES]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad[0]!r} is not one of {', '.join(MODES)}")
    return kinds


def outputs_of(args: argparse.Namespace) -> list[tuple[str, Rendering | None]]:
    """What ``--save`` asks for, each kind once in the order given, checked before any work
    (a background image file is read here); None for the plain mask."""
    from ..errors import UserError
    from ..inference.render import Rendering, background_of, parse_color

    kinds = list(dict.fromkeys(kind for group in args.save or [["mask"]] for kind in group))
    foreground = args.foreground or ("ml" if args.estimate_foreground else "none")
    if args.estimate_foreground and args.foreground not in (None, "ml"):
        raise UserError(f"--estimate-foreground means --foreground ml; it cannot go with "
                        f"--foreground {args.foreground}")
    if "cutout" not in kinds and (args.background or foreground != "none"):
        raise UserError("--background and --foreground / --estimate-foreground apply to "
                        "--save cutout")
    background = background_of(args.background) if args.background else None
    tint = parse_color(args.tint, "--tint")
    return [(kind, None if kind == "mask" else Rendering(
        kind, args.threshold, background, tint, foreground)) for kind in kinds]


def check_out(targets: Targets, inputs: list[str], paths: list[Path], force: bool,
              extra: Sequence[Path] = ()) -> None:
    """Before any work: ``--out`` is a folder apart from the inputs, of ``sodkit predict``'s
    own (or the user's, with ``--force``), and replaces no file it may not (``extra``: the
    videos' outputs); ``--out NAME.png`` obeys the rules of single files
    (:func:`sodkit.outputs.single_file`)."""
    from ..errors import UserError
    from ..outputs import OutputFolder, check_claim, kind_of, single_file

    every = [targets.path(p.stem, kind) for p in paths for kind in targets.kinds] + list(extra)
    if targets.single:
        for path in every:
            single_file(path, "predict", force, "--out", [Path(p) for p in inputs] + paths)
        return
    out = targets.out
    check_claim(out, "predict", force)
    for kind in targets.kinds if len(targets.kinds) > 1 else ():
        if (out / kind).exists() and not (out / kind).is_dir():
            raise UserError(f"--out {out}: {out / kind} is a file; the {kind} outputs go into "
                            f"a folder of that name")
    if out.is_dir():
        kind = kind_of(out)
        OutputFolder(out, kind, force, record=kind is not None).check(every)


def run(args: argparse.Namespace) -> int:
    from ..foreground import check_foreground_memory
    from ..predict_plan import collect_inputs, input_sizes, plan, resolve
    from ..resources import keep_freed_memory
    from ..runners.choice import check_onnx_installed
    from .predict_lean import lean_plan, predict_lean
    from .predict_videos import check_clips, plan_clips, split_inputs

    outputs = outputs_of(args)
    check_onnx_installed(args.runtime, args.precision, args.device)  # before torch loads
    keep_freed_memory()
    every = collect_inputs(args.inputs)
    paths, videos = split_inputs(every)  # images, videos
    targets = plan(args.out, args.inputs, every, [kind for kind, _ in outputs])
    clips = plan_clips(targets, videos, args.skip_bad)  # headers: each a video, within limits
    check_clips(clips)
    check_out(targets, args.inputs, paths, args.force, [p for c in clips for p in c.files()])
    files = resolve(targets, paths)
    sizes = input_sizes(paths, args.skip_bad)  # headers: every image is one, within limits
    sizes.update({c.info.path: (c.info.height, c.info.width) for c in clips})
    largest = max(sizes, key=lambda p: sizes[p][0] * sizes[p][1], default=None)
    foreground = any(r is not None and r.estimator == "ml" for _, r in outputs)  # pymatting's
    if foreground and largest is not None:
        check_foreground_memory(*sizes[largest], largest)
    at_most = sizes[largest] if largest is not None else (0, 0)
    lean = lean_plan(args, paths, bool(clips), outputs, at_most)
    if lean is not None:  # a cached graph does it all: no torch (predict_lean)
        return predict_lean(lean, args, paths, targets, files, outputs)
    return _predict(args, paths, clips, targets, files, outputs, at_most)


def _predict(args: argparse.Namespace, paths: list[Path], clips: list[Clip], targets: Targets,
             files: list[dict[str, Path]], outputs: list[tuple[str, Rendering | None]],
             largest: tuple[int, int]) -> int:
    """Load, choose the batch, say what will happen, predict (the checks are done)."""
    from ..config import RuntimeCfg
    from ..engine.batch_memory import worth_probing
    from ..engine.predictor import ImageBatches, predict_files, probe_memory
    from ..engine.runtime import Runtime
    from ..inference.pipelines import build_test_transform, postprocess_of
    from ..runners.choice import choose
    from ..runners.load import load_runner
    from ..trained import read_trained
    from .predict_lean import claim_outputs, decode_workers
    from .predict_videos import predict_clips, refuse_distributed

    resolve_model_argument(args)  # --model NAME: fetched and converted once, then cached
    stored = read_trained(args.checkpoint)  # the network is built once decoding has started
    cfg = stored.config
    runtime = Runtime(RuntimeCfg(device=args.device, precision="fp32", seed=cfg.runtime.seed,
                                 num_threads=args.threads))
    chosen = choose(args.runtime, args.precision, runtime.device.type)
    transform = build_test_transform(cfg.data, size=args.size)
    workers = decode_workers(args, len(paths))
    refuse_distributed(clips, runtime)
    keep = any(r is not None and r.needs_image for _, r in outputs)
    size, tta = args.size or cfg.data.size, cfg.eval.tta if args.tta is None else args.tta

    def batches(batch: int) -> ImageBatches | None:  # decoding starts: workers read ahead
        return ImageBatches(paths, transform, runtime, batch, workers, keep,
                            args.skip_bad) if paths else None

    # the batch is known now unless the probe must measure the network: then decoding waits
    choice = None if worth_probing(size, runtime.device, args.batch_size) else _choice(
        None, size, runtime, args, outputs, keep, largest, workers, bool(clips))
    early = args.batch_size or (choice.batch if choice else None)
    images = batches(early) if early else None  # decoding meanwhile the network is built
    try:
        loaded = load_runner(stored, chosen, size=size, threads=torch_threads(),
                             weights=args.weights, device=runtime.device, mapped=True,
                             coarse=postprocess_of(transform).coarse, transform=transform)
        model = loaded.network  # a PyTorch network on the file's pages: the command ends
        if choice is None:
            choice = _choice(probe_memory(model, transform, runtime, size, tta,
                                          loaded.precision, source=stored.source),
                             size, runtime, args, outputs, keep, largest, workers, bool(clips))
        images = images or batches(choice.batch)
        _opening_line(runtime, cfg, args, (len(paths), clips), choice, workers, targets,
                      outputs, loaded.choice.describe())
        folder = claim_outputs(targets, args.force) if runtime.is_main else None
        runtime.barrier()
        if paths:
            predict_files(model, paths, transform, runtime, folder or targets.folder,
                          batch_size=choice.batch, num_workers=workers, tta=tta,
                          skip_bad=args.skip_bad, images=images, outputs=outputs,
                          targets=files, where=targets.where(), progress=True,
                          precision=loaded.precision)
        predict_clips(model, clips, transform, runtime, folder, choice.batch, tta, outputs,
                      loaded.precision)
    finally:
        if images is not None:
            images.close()
        runtime.close()
    return 0


def torch_threads() -> int:
    """The process's compute threads (the Runtime set them), which onnxruntime's session
    takes too."""
    import torch

    return torch.get_num_threads()


def _choice(per_image: int | None, size: int, runtime: Any, args: argparse.Namespace,
            outputs: list, keep: bool, largest: tuple[int, int], workers: int,
            clips: bool = False) -> BatchChoice:
    """The batch (:func:`~sodkit.commands.predict_lean.choose_predict_batch`) on the
    runtime's device."""
    from .predict_lean import choose_predict_batch

    return choose_predict_batch(per_image, size, runtime.device, args, outputs, keep, largest,
                                workers, clips)


def _opening_line(runtime: Any, cfg: Any, args: argparse.Namespace,
                  count: tuple[int, list[Clip]], choice: BatchChoice, workers: int,
                  targets: Targets, outputs: list, runner: str) -> None:
    """What the command will do, before it does it: the first line of a long run."""
    import torch

    from ..text import plural
    from .predict_lean import say_opening
    from .predict_videos import describe

    if not runtime.is_main:
        return
    where = f"{runtime.device}" + (f", {runtime.world_size} processes"
                                   if runtime.world_size > 1 else "")
    decoding = plural(workers, "decoding worker") if workers else "decoding in this process"
    say_opening(describe(*count), f"{cfg.model.name}/{cfg.model.backbone}",
                args.size or cfg.data.size, where, runner, torch.get_num_threads(), choice,
                decoding, outputs, count[0] + len(count[1]), targets.where())
