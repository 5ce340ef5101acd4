"""``sodkit train``: train from a recipe, evaluate on its test sets, write the run folder."""

from __future__ import annotations

import argparse
import logging
import shutil

from ._common import add_config_arguments, load_cli_config, run_dir_of

HELP = "train a network from a YAML recipe, then evaluate it on the recipe's test sets"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument(
        "--resume", metavar="auto|PATH",
        help="continue from a checkpoint: 'auto' takes the run folder's checkpoints/last.pt "
             "when there is one (a fresh start otherwise)",
    )
    parser.add_argument(
        "--overwrite", action="store_true",
        help="delete an existing run folder of the same name first",
    )


def run(args: argparse.Namespace) -> int:
    cfg = load_cli_config(args)
    run_dir = run_dir_of(cfg)
    _check_run_folder(run_dir, args)

    from ..engine.logging import setup_logging
    from ..engine.runtime import Runtime
    from ..engine.trainer import Trainer

    runtime = Runtime(cfg.runtime)
    try:
        if runtime.is_main and args.overwrite and run_dir.exists():
            shutil.rmtree(run_dir)
        runtime.barrier()
        setup_logging(run_dir / "train.log", runtime.is_main)
        trainer = Trainer(cfg, runtime, run_dir)
        resume = trainer.checkpoints.resolve_resume(args.resume)
        if resume is not None:
            trainer.load_state_dict(trainer.checkpoints.load(resume))
            logger.info("resumed from %s at epoch %d, step %d", resume, trainer.epoch, trainer.step)
        trainer.fit()
    finally:
        runtime.close()
    return 0


def _check_run_folder(run_dir, args: argparse.Namespace) -> None:
    """Refuse to train over another run's checkpoints unless the user says resume or overwrite."""
    from ..errors import UserError

    if args.resume and args.overwrite:
        raise UserError("--resume and --overwrite exclude each other")
    if (run_dir / "checkpoints").is_dir() and not (args.resume or args.overwrite):
        raise UserError(
            f"run folder {run_dir} already holds checkpoints; pass --resume auto to continue it, "
            f"--overwrite to replace it, or name=... to start another run"
        )
