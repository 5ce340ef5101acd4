"""``sodkit test``: evaluate a checkpoint on the recipe's test sets; save predictions, results.

The evaluation goes beside the training run's own results, into
``<run folder>/eval/<checkpoint name>/`` (or ``--out``), so testing a checkpoint never replaces
what ``sodkit train`` wrote; an earlier evaluation in that folder is replaced only with
``--overwrite``.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from ._common import (
    add_config_arguments,
    add_weights_argument,
    load_cli_config,
    load_weights,
    run_dir_of,
    user_path,
)

HELP = "evaluate a checkpoint on the recipe's test sets and save predictions and results"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--checkpoint", required=True, help="a .pt file written by sodkit train")
    parser.add_argument("--out", type=user_path,
                        help="folder for this evaluation (default: <run folder>/eval/"
                             "<checkpoint name>/, beside the training run's results)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an earlier evaluation in that folder")
    add_weights_argument(parser)


def output_folder(args: argparse.Namespace, run_dir: Path) -> Path:
    """Where this evaluation goes, checked before any work (inputs are never outputs)."""
    from ..errors import UserError
    from ..paths import check_name, check_not_input, check_removable, is_owned

    checkpoint = Path(args.checkpoint)
    out = Path(args.out) if args.out else run_dir / "eval" / check_name(
        checkpoint.stem, "--checkpoint (its file name)", "last.pt")
    check_not_input(out, [checkpoint], "--out")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder")
    if (out / "results.json").exists():
        if not args.overwrite:
            raise UserError(f"{out} already holds an evaluation (results.json); pass "
                            f"--overwrite to replace it, or --out DIR to write elsewhere")
        check_removable(out, out.parent)
    elif out.is_dir() and any(out.iterdir()) and not is_owned(out):
        raise UserError(f"--out {out} holds files that sodkit did not write; choose a new or "
                        f"empty folder")
    return out


def run(args: argparse.Namespace) -> int:
    cfg = load_cli_config(args)
    out = output_folder(args, run_dir_of(cfg))

    from ..data import build_test_loaders
    from ..engine.evaluator import evaluate, write_eval_outputs
    from ..engine.logging import close_log_file, setup_logging
    from ..engine.runtime import Runtime
    from ..errors import UserError
    from ..network import build_network
    from ..paths import claim_folder, remove_run_folder
    from ..torchfile import load_checkpoint

    if not cfg.data.test:
        raise UserError(f"{args.config}: data.test is empty; list the test sets to evaluate")
    runtime = Runtime(cfg.runtime)
    try:
        runtime.check_precision(cfg.eval.precision, "eval.precision")
        state = load_checkpoint(args.checkpoint)
        loaders = build_test_loaders(cfg, runtime.rank, runtime.world_size)
        if runtime.is_main:
            if args.overwrite:
                remove_run_folder(out, out.parent)
            claim_folder(out, "test")
        runtime.barrier()
        setup_logging(out / "test.log", runtime.is_main)
        model = build_network(replace(cfg.model, pretrained=None))  # weights: the checkpoint
        which = load_weights(model, state, Path(args.checkpoint), args.weights)
        model = runtime.wrap(model)
        logger.info("evaluating %s (epoch %s, %s weights) on %s", args.checkpoint,
                    state.get("epoch"), which, ", ".join(loaders))
        pred_root = out / "predictions" if cfg.eval.save_predictions else None
        result = evaluate(model, loaders, runtime, cfg, pred_root)
        if runtime.is_main:
            write_eval_outputs(result, out)
            logger.info("results written to %s", out / "results.json")
    finally:
        close_log_file(out / "test.log")  # a later run in this process logs elsewhere
        runtime.close()
    return 0
