"""``sodkit test``: evaluate a checkpoint on the recipe's test sets; save predictions, results."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from ._common import add_config_arguments, load_cli_config, load_weights, run_dir_of

HELP = "evaluate a checkpoint on the recipe's test sets and save predictions and results"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--checkpoint", required=True, help="a .pt file written by sodkit train")


def run(args: argparse.Namespace) -> int:
    cfg = load_cli_config(args)
    run_dir = run_dir_of(cfg)

    from ..data import build_test_loaders
    from ..engine.evaluator import evaluate, write_eval_outputs
    from ..engine.logging import setup_logging
    from ..engine.runtime import Runtime, load_checkpoint
    from ..errors import UserError
    from ..network import build_network

    if not cfg.data.test:
        raise UserError(f"{args.config}: data.test is empty; list the test sets to evaluate")
    runtime = Runtime(cfg.runtime)
    try:
        setup_logging(run_dir / "test.log", runtime.is_main)
        state = load_checkpoint(args.checkpoint)
        model = build_network(replace(cfg.model, pretrained=None))  # weights: the checkpoint
        load_weights(model, state, Path(args.checkpoint))
        model = runtime.wrap(model)
        loaders = build_test_loaders(cfg, runtime.rank, runtime.world_size)
        logger.info("evaluating %s (epoch %s) on %s", args.checkpoint, state.get("epoch"),
                    ", ".join(loaders))
        pred_root = run_dir / "predictions" if cfg.eval.save_predictions else None
        result = evaluate(model, loaders, runtime, cfg, pred_root)
        if runtime.is_main:
            write_eval_outputs(result, run_dir)
            logger.info("results written to %s", run_dir / "results.json")
    finally:
        runtime.close()
    return 0
