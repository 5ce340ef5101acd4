"""``sodkit train``: train from a recipe, evaluate on its test sets, write the run folder."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ._common import add_config_arguments, check_model_files, load_cli_config, run_dir_of

if TYPE_CHECKING:
    from ..engine.preemption import StopRequest

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
        help="delete the existing run folder of the same name first (only a folder sodkit "
             "created under output_root is ever deleted)",
    )


def run(args: argparse.Namespace) -> int:
    # SIGTERM / Ctrl-C from the first moment (a scheduler may stop a job while torch is still
    # being imported): a stop before training is exit 75 with nothing written, not a kill
    from ..engine.preemption import StopRequest

    with StopRequest() as stop:
        return _train(args, stop)


def _train(args: argparse.Namespace, stop: StopRequest) -> int:
    cfg = load_cli_config(args)
    stop.arm(cfg.runtime.stop_grace_s)
    run_dir = run_dir_of(cfg)
    resume = args.resume or ("auto" if cfg.train.auto_resume and not args.overwrite else None)
    _check_run_folder(run_dir, Path(cfg.output_root), args.overwrite, resume)
    fresh = resume is None or (resume == "auto" and not any(
        (run_dir / "checkpoints").glob("*.pt")))
    check_model_files(cfg, init_from=fresh)  # names and paths first: no data read yet

    from ..config.epochs import epoch_warnings
    from ..engine.checkpoint import CheckpointManager
    from ..engine.logging import close_log_file, setup_logging
    from ..engine.runtime import Runtime
    from ..engine.trainer import Trainer
    from ..outputs import claim, remove_run_folder
    from ..report.html import write_run_report

    stop.before_training()
    runtime = Runtime(cfg.runtime)
    try:
        runtime.check_precision(cfg.eval.precision, "eval.precision")
        # Everything that can refuse the run (the checkpoint, the data, the network, the
        # resumed state) is read and built before anything is deleted or written: an error
        # before any work leaves no run folder behind.
        setup_logging(None, runtime.is_main)
        for line in epoch_warnings(cfg):  # settings a run of this length never reaches
            logger.warning(line)
        found = CheckpointManager(run_dir / "checkpoints", runtime).load_resume(resume)
        resume, state = found if found is not None else (None, None)
        trainer = Trainer(cfg, runtime, run_dir, resuming=state is not None)
        if state is not None:
            trainer.load_state_dict(state)
        stop.before_training(runtime.any_rank)  # agreed over the ranks: all stop, or none
        if runtime.is_main:
            if args.overwrite:
                remove_run_folder(run_dir, Path(cfg.output_root))
            claim(run_dir, "train", what="run folder")
            _check_outputs(run_dir, trainer.pending_outputs())
        runtime.barrier()
        setup_logging(run_dir / "train.log", runtime.is_main)
        if state is not None:
            logger.info("resumed from %s at %s", resume, trainer.position())
        trainer.fit(stop, report=write_run_report)  # report.html: after the final save
    finally:
        close_log_file(run_dir / "train.log")  # a later run in this process logs elsewhere
        runtime.close()
    return 0


def _check_outputs(run_dir: Path, paths: list[Path]) -> None:
    """The results the run will write at its end replace only files it wrote, unchanged: said
    before training (train has no --force: a file of the user's is moved away by the user)."""
    from ..outputs import OutputFolder

    folder = OutputFolder.at(run_dir)
    folder.flag = None
    folder.check(paths)


def _check_run_folder(run_dir: Path, output_root: Path, overwrite: bool,
                      resume: str | None) -> None:
    """Before any work: never train over another run, and never into a folder not sodkit's."""
    from ..errors import UserError
    from ..outputs import MARKER, check_removable, is_owned

    if resume and overwrite:
        raise UserError("--resume and --overwrite exclude each other")
    if resume not in (None, "auto") and not Path(resume).is_file():
        raise UserError(f"--resume {resume}: " + ("a folder; give the checkpoint file, e.g. "
                        f"{Path(resume) / 'checkpoints' / 'last.pt'}" if Path(resume).is_dir()
                        else "file not found") + " (or --resume auto)")
    if overwrite:
        check_removable(run_dir, output_root)
        return
    from ..outputs import check_claim

    check_claim(run_dir, "train", what="run folder")  # not another command's folder
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"run folder {run_dir} is a file; choose another name=...")
    if run_dir.is_dir() and any(run_dir.iterdir()) and not is_owned(run_dir):
        raise UserError(
            f"run folder {run_dir} holds files but was not created by sodkit (no {MARKER} "
            f"marker); choose another name=... (a run folder of sodkit before 0.2: mark it as "
            f"sodkit's with `touch {run_dir / MARKER}`)"
        )
    if (run_dir / "checkpoints").is_dir() and not resume:
        raise UserError(
            f"run folder {run_dir} already holds checkpoints; pass --resume auto to continue it, "
            f"--overwrite to replace it, or name=... to start another run"
        )
