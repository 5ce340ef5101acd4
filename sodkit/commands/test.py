"""``sodkit test``: evaluate a checkpoint on the recipe's test sets; save predictions, results.

The evaluation goes beside the training run's own results, into
``<run folder>/eval/<checkpoint name>/`` (or ``--out``), so testing a checkpoint never replaces
what ``sodkit train`` wrote. ``--out`` is a new or empty folder or one of ``sodkit test``'s own
(never a training run or another command's output); an earlier evaluation there is replaced
only with ``--overwrite``, which deletes it only when it holds nothing but what ``sodkit test``
wrote, unchanged (:mod:`sodkit.outputs`). Nothing is written inside the test sets' folders.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import user_path
from ._common import (
    add_config_arguments,
    add_model_arguments,
    add_runtime_arguments,
    add_weights_argument,
    load_cli_config,
    resolve_model_argument,
    run_dir_of,
)

if TYPE_CHECKING:
    from ..config import Config
    from ..runners.choice import Choice
    from ..runners.load import Loaded

HELP = "evaluate a checkpoint on the recipe's test sets and save predictions and results"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    add_model_arguments(parser)  # --model NAME: its own network, CONFIG's test sets
    parser.add_argument("--out", type=user_path,
                        help="folder for this evaluation (default: <run folder>/eval/"
                             "<checkpoint name>/, beside the training run's results)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an earlier evaluation in that folder")
    add_weights_argument(parser)
    add_runtime_arguments(parser, precision=None)


def output_folder(args: argparse.Namespace, run_dir: Path) -> Path:
    """Where this evaluation goes, checked before any work (inputs are never outputs)."""
    from ..errors import UserError
    from ..outputs import check_claim, check_removable
    from ..paths import check_name, check_not_input

    checkpoint = Path(args.checkpoint)
    fetched = bool(getattr(args, "model", None))  # --model NAME: in the cache once fetched
    if not fetched and (checkpoint.is_dir() or not checkpoint.is_file()):
        raise UserError(f"--checkpoint {checkpoint}: " + (
            "a folder; give the file, e.g. " + str(checkpoint / "checkpoints" / "last.pt")
            if checkpoint.is_dir() else "file not found"))
    out = Path(args.out) if args.out else run_dir / "eval" / check_name(
        checkpoint.stem, "--checkpoint (its file name)", "last.pt")
    check_not_input(out, [checkpoint], "--out")
    check_claim(out, "test")
    if args.overwrite:
        check_removable(out, out.parent, "test")
    elif (out / "results.json").exists():
        raise UserError(f"{out} already holds an evaluation (results.json); pass "
                        f"--overwrite to replace it, or --out DIR to write elsewhere")
    return out


def _dataset_folders(loaders: dict) -> list[Path]:
    """The test sets' image and mask folders (nothing is written inside them)."""
    return sorted({folder for loader in loaders.values() for pair in loader.dataset.pairs
                   for folder in (pair.image.parent, pair.mask.parent)})


def follow_preprocess(cfg: Config, state: dict, source: str | Path = "the checkpoint"
                      ) -> Config:
    """``data.preprocess`` unset: the checkpoint's own inference pipeline (an imported model
    file records its authors'), so that the recipe evaluates it as the authors did; a stored
    value that is no known pipeline is one line naming the file."""
    from ..config.stored import stored_preprocess

    stored = stored_preprocess(state.get("config"), source)
    if cfg.data.preprocess is not None or not stored:
        return cfg
    logger.info("inference pipeline: %s (data.preprocess of the checkpoint)", stored)
    return replace(cfg, data=replace(cfg.data, preprocess=stored))


def _choice(cfg: Config, runtime: Any, args: argparse.Namespace) -> Choice:
    """``--runtime`` and ``--precision`` (default: ``eval.precision``), checked before any
    work; a float64 run (``runtime.precision``) stays on PyTorch."""
    from ..runners.choice import choose

    name = "torch" if cfg.runtime.precision == "fp64" and args.runtime == "auto" else (
        args.runtime)
    return choose(name, args.precision or cfg.eval.precision, runtime.device.type)


def _load(stored: Any, cfg: Config, loaders: dict, runtime: Any, args: argparse.Namespace,
          chosen: Choice) -> Loaded:
    """The recipe's network on the chosen runtime, its graph exported at the recipe's size
    (:mod:`sodkit.runners`)."""
    import torch

    from ..inference.pipelines import postprocess_of
    from ..runners.load import load_runner

    transform = next(iter(loaders.values())).dataset.transform
    return load_runner(stored, chosen, size=cfg.data.size, threads=torch.get_num_threads(),
                       weights=args.weights, device=runtime.device, model=cfg.model,
                       coarse=postprocess_of(transform).coarse, transform=transform)


def run(args: argparse.Namespace) -> int:
    cfg = load_cli_config(args)
    if not cfg.data.test:  # names and paths first, before torch is imported
        from ..errors import UserError

        raise UserError(f"{args.config}: data.test is empty; list the test sets to evaluate")
    resolve_model_argument(args, fetch=False)  # its name names the output folder
    out = output_folder(args, run_dir_of(cfg))
    resolve_model_argument(args)  # --model NAME: fetched and converted once, then cached

    from ..data import build_test_loaders
    from ..engine.evaluator import eval_output_paths, evaluate
    from ..engine.logging import close_log_file, setup_logging
    from ..engine.position import checkpoint_position
    from ..engine.runtime import Runtime
    from ..errors import UserError
    from ..outputs import claim, remove_run_folder
    from ..paths import check_not_input
    from ..report.html import write_run_report
    from ..report.run_results import write_eval_outputs
    from ..resources import keep_freed_memory
    from ..trained import read_trained

    keep_freed_memory()
    runtime = Runtime(cfg.runtime)
    folder = None
    try:
        runtime.check_precision(cfg.eval.precision, "eval.precision")
        chosen = _choice(cfg, runtime, args)
        stored = read_trained(args.checkpoint)
        cfg = follow_preprocess(cfg, stored.state, stored.source)
        if args.model:  # a model by name brings its network; CONFIG gives the test sets
            cfg = replace(cfg, model=replace(stored.config.model, pretrained=None,
                                             init_from=None))
        loaders = build_test_loaders(cfg, runtime.rank, runtime.world_size)
        check_not_input(out, _dataset_folders(loaders))
        pred_root = out / "predictions" if cfg.eval.save_predictions else None
        if runtime.is_main:
            if args.overwrite:
                remove_run_folder(out, out.parent, "test")
            folder = claim(out, "test")
            folder.check(eval_output_paths(out, loaders, pred_root))
        runtime.barrier()
        setup_logging(out / "test.log", runtime.is_main)
        loaded = _load(stored, cfg, loaders, runtime, args, chosen)  # the recipe's network
        model = loaded.network if loaded.is_onnx else runtime.wrap(loaded.network)
        cfg = replace(cfg, eval=replace(cfg.eval, precision=loaded.precision))
        logger.info("evaluating %s (%s, %s weights, %s) on %s", args.checkpoint,
                    checkpoint_position({**stored.provenance, **stored.state}),
                    loaded.weights, loaded.choice.describe(), ", ".join(loaders))
        result = evaluate(model, loaders, runtime, cfg, pred_root)
        if runtime.is_main:
            write_eval_outputs(result, folder)
            write_run_report(folder)
            logger.info("results written to %s", out / "results.json")
    finally:
        close_log_file(out / "test.log")  # a later run in this process logs elsewhere
        runtime.close()
    return 0
