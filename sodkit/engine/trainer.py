"""``fit()``: epochs of optimizer steps with accumulation, logging, evaluation and checkpoints.

The loop is plain code; the :class:`~sodkit.engine.runtime.Runtime` owns devices, DDP, autocast,
the GradScaler and file writes. Losses are accumulated as tensors and reduced over ranks only at
the log interval, so the hot path never waits for a ``.item()``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from ..config import Config, save_config, to_dict
from ..data import build_test_loaders, build_train_loader, set_epoch
from ..errors import DataError, UserError
from ..loss import build_criterion
from ..module import freeze_batchnorm
from ..network import build_network
from ..optim import build_optimizer, build_scheduler, step_scheduler
from ..report.run_results import EvalResult, write_eval_outputs
from ..text import plural
from ..torchfile import FORMAT as CHECKPOINT_FORMAT
from .at_start import evaluate_start
from .checkpoint import CheckpointManager
from .ema import EMA
from .evaluator import evaluate
from .init_from import init_model
from .logging import Progress, TensorBoard, Throughput
from .position import training_position
from .preemption import Preempted, SaveClock, StopRequest
from .resume import check_resume, load_model_state
from .runtime import Runtime
from .step import TrainStep
from .train_log import TrainerLog

logger = logging.getLogger(__name__)


class Trainer(TrainerLog):
    """Holds the training state that a checkpoint saves and ``--resume`` restores."""

    def __init__(self, cfg: Config, runtime: Runtime, run_dir: Path,
                 resuming: bool = False) -> None:
        self.cfg, self.runtime, self.run_dir = cfg, runtime, run_dir
        self.train_loader = build_train_loader(cfg, runtime.rank, runtime.world_size)
        self.test_loaders = build_test_loaders(cfg, runtime.rank, runtime.world_size,
                                               val=self.train_loader.dataset.held_out)
        # Side outputs nobody trains are not computed (DDP needs a gradient for every parameter).
        net = build_network(cfg.model, aux_outputs=cfg.loss.uses_aux)
        # model.init_from, on every rank before DDP and EMA copy the weights (a resume's own)
        self.init = None if resuming else init_model(net, cfg)
        self.resuming = resuming  # the weights come from the run's own checkpoint
        # before DDP: the criterion may switch on outputs whose parameters DDP must then reduce
        self.criterion = build_criterion(cfg.loss, net, cfg.train.epochs).to(runtime.device)
        self.model = runtime.wrap(net)
        micro_batches = len(self.train_loader) // cfg.train.accumulate
        if micro_batches == 0:
            raise DataError(
                "the training set is smaller than one optimizer step (data.batch_size x "
                f"train.accumulate x processes = {self.global_batch})"
            )
        self.steps_per_epoch = min(micro_batches, cfg.train.steps_per_epoch or micro_batches)
        net = runtime.unwrap(self.model)
        self.optimizer = build_optimizer(net, cfg.optim, self.global_batch)
        self.scheduler = build_scheduler(
            self.optimizer, cfg.schedule, self.steps_per_epoch, cfg.train.epochs
        )
        self.epoch = 0  # completed epochs
        self.evaluated = 0  # the last epoch whose evaluation finished (pending when < epoch)
        self.step = 0  # completed optimizer steps
        self.epoch_step = 0  # completed optimizer steps of the epoch in progress
        self.best: dict[str, Any] | None = None  # {"metric", "value", "epoch"}
        self.checkpoints = CheckpointManager(run_dir / "checkpoints", runtime,
                                             keep=cfg.train.keep_checkpoints)
        self.checkpoints.check_selection(cfg.eval, list(self.test_loaders))
        self.tb = TensorBoard(None)  # opened by fit(), once the resume step is known
        self.stop: StopRequest | None = None  # fit()'s signal handlers
        self.clock = SaveClock(cfg.train.checkpoint_every_steps, cfg.train.checkpoint_minutes)
        self.bad_steps = 0  # steps whose gradients were not finite (not applied)
        self.start_results: dict[str, Any] | None = None  # eval.at_start's numbers (epoch 0)
        # EMA of the weights (engine/ema.py): evaluated and saved as "ema" when train.ema_decay
        self.ema = EMA(net, cfg.train.ema_decay) if cfg.train.ema_decay else None
        self.train_step = TrainStep(self.model, self.criterion, self.optimizer, runtime,
                                    cfg.train.accumulate, cfg.train.grad_clip,
                                    restore_buffers=cfg.train.max_bad_steps > 0, ema=self.ema)

    @property
    def global_batch(self) -> int:
        data = self.cfg.data
        return data.batch_size * self.cfg.train.accumulate * self.runtime.world_size

    # ------------------------------------------------------------------ state
    def position(self) -> str:
        """Where the run stands, as every log line says it (``epoch 2/4 step 5/12``)."""
        return training_position(self.epoch, self.epoch_step, self.cfg.train.epochs, self.step,
                                 self.steps_per_epoch)

    def state_dict(self) -> dict[str, Any]:
        """The checkpoint's content: tensors and plain Python values only (``weights_only``).

        A collective: every rank calls it, and rank 0 receives every rank's RNG states (a list
        indexed by rank) and place in the job. The sampler needs no state of its own: each rank's
        batches are a function of (seed, epoch, rank, world size), and the position in the epoch
        is ``epoch_step``.
        """
        rt = self.runtime
        me = {"rank": rt.rank, "local_rank": rt.local_rank, "host": socket.gethostname()}
        ranks = rt.gather_to_main({**me, "rng": rt.rng_state()}) or []
        return {
            "format": CHECKPOINT_FORMAT,
            "model": self.runtime.unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.runtime.scaler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "init": self.init,
            "start_results": self.start_results,
            "epoch": self.epoch,
            "evaluated": self.evaluated,
            "step": self.step,
            "steps_per_epoch": self.steps_per_epoch,
            "epoch_step": self.epoch_step,
            "bad_steps": self.bad_steps,
            "best": self.best,
            "config": to_dict(self.cfg),
            "world_size": rt.world_size,
            "ranks": [{k: v for k, v in r.items() if k != "rng"} for r in ranks],
            "rng": [r["rng"] for r in ranks],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_model_state(self.runtime.unwrap(self.model), state, self.cfg)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.runtime.scaler.load_state_dict(state["scaler"])
        if self.ema is not None and state.get("ema"):
            self.ema.load_state_dict(state["ema"])
        elif self.ema is not None:  # a checkpoint without EMA: the average starts from it
            self.ema.reset(self.runtime.unwrap(self.model))
        self.epoch, self.step, self.best = state["epoch"], state["step"], state["best"]
        self.init, self.start_results = state.get("init"), state.get("start_results")
        # sodkit before 0.3 saved an epoch after its evaluation: evaluated when saved
        self.evaluated = int(state.get("evaluated", self.epoch))
        self.bad_steps = int(state.get("bad_steps", 0))
        self.epoch_step = int(state.get("epoch_step", 0))
        check_resume(state, self.cfg, self.runtime.world_size, self.steps_per_epoch)
        self._restore_rng(state)

    def _restore_rng(self, state: dict[str, Any]) -> None:
        """Each rank gets its own RNG states back; another world size resumes, inexactly."""
        rt = self.runtime
        states = state["rng"]
        if isinstance(states, Mapping):  # checkpoints of sodkit before per-rank states
            states = [states]
        if rt.rank < len(states):
            rt.set_rng_state(states[rt.rank])

    def pending_outputs(self) -> list[Path]:
        """The result files this run will still write (its final evaluation's, with the
        predictions; ``results_start.json`` when ``eval.at_start`` is to run), so that a file
        of the user's at one of these names stops the run before training, not at its end."""
        from .at_start import FILE as START_FILE
        from .evaluator import eval_output_paths

        paths: list[Path] = []
        if self.test_loaders and self.evaluated < self.cfg.train.epochs:
            pred_root = self.run_dir / "predictions" if self.cfg.eval.save_predictions else None
            paths += [p for p in eval_output_paths(self.run_dir, self.test_loaders, pred_root)
                      if p.name != "report.html"]  # a report is rewritten or warned about
        if self.cfg.eval.at_start and self.step == 0 and self.start_results is None:
            paths.append(self.run_dir / START_FILE)
        return paths

    # ------------------------------------------------------------------ loop
    def fit(self, stop: StopRequest | None = None,
            report: Callable[[Path], None] | None = None) -> EvalResult | None:
        """Train the remaining steps and evaluate; the run folder ends with results, last.pt
        and report.html, written by the command's ``report`` (rank 0, after the final save).

        Each epoch's state is saved before its evaluation, and the stop handler covers the
        whole run, evaluations and writes included: a stop or a failure after an epoch never
        costs its training, and ``--resume auto`` goes on with what was not done yet (an
        interrupted evaluation first).

        Raises:
            Preempted: a SIGTERM / SIGINT stopped the run after saving its state.
        """
        cfg, rt = self.cfg, self.runtime
        if rt.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_config(cfg, self.run_dir / "config.yaml")
            self.checkpoints.remove_stale_files()
            self._log_start()
        self.tb = TensorBoard(self.run_dir / "tb" if rt.is_main else None,
                              purge_step=self.step + 1 if self.step else None)
        meter = Throughput(cfg.train.epochs * self.steps_per_epoch, self.step)
        try:
            # the command's own handlers when it installed them first thing (sodkit train)
            handlers = (contextlib.nullcontext(stop) if stop is not None
                        else StopRequest(cfg.runtime.stop_grace_s))
            with handlers as stop:
                stop.training = True
                self.stop = stop
                if cfg.eval.at_start and self.step == 0 and self.start_results is None:
                    self.start_results = evaluate_start(
                        self.ema.module if self.ema is not None else self.model,
                        self.test_loaders, rt, cfg, self.run_dir, self.tb,
                        lambda: stop.received is not None)
                if self.epoch_step == 0 and self.epoch < cfg.train.epochs:
                    self._evaluate_if_due(self.epoch)  # a resumed run whose evaluation stopped
                for epoch in range(self.epoch, cfg.train.epochs):
                    self._train_epoch(epoch, meter, stop)
                    self._end_epoch(epoch + 1)
                return self._finish(report)
        finally:
            self.tb.close()

    def _end_epoch(self, epoch: int) -> None:
        """The epoch's state on disk first (whenever something follows it), then the rest."""
        cfg = self.cfg
        self.epoch, self.epoch_step = epoch, 0
        if not self.test_loaders:
            self.evaluated = epoch  # nothing to evaluate, nothing pending
        last = epoch == cfg.train.epochs  # its evaluation follows the loop
        if last or self._eval_due(epoch) or epoch % cfg.train.checkpoint_every == 0:
            self._save()
        if cfg.train.keep_every and epoch % cfg.train.keep_every == 0:
            self.checkpoints.save_snapshot(self.state_dict())
        if not last:
            self._evaluate_if_due(epoch)

    def _eval_due(self, epoch: int) -> bool:
        every = self.cfg.eval.every
        return epoch == self.cfg.train.epochs or bool(every) and epoch % every == 0

    def _evaluate_if_due(self, epoch: int) -> None:
        if self._eval_due(epoch) and self.evaluated < epoch:
            self._evaluate(pred_root=None)

    def _finish(self, report: Callable[[Path], None] | None) -> EvalResult | None:
        """The final evaluation and its files, last.pt with the final ``best``, then the report
        (it lists the checkpoints, so it comes after every save)."""
        result = None
        if self.evaluated < self.epoch:
            result = self._evaluate(pred_root=self.run_dir / "predictions")
            self._save()  # `evaluated` and the final `best`, so a resume has nothing to redo
        else:
            logger.info("all %s are trained and evaluated; writing the report",
                        plural(self.epoch, "epoch"))
        if report is not None and self.runtime.is_main and self.test_loaders:  # needs results
            report(self.run_dir)
        self.runtime.barrier()
        if self.runtime.any_rank(self.stop.received is not None)[0]:
            raise Preempted(f"stopped by {self.stop.received or 'a signal on another rank'} as "
                            f"the run finished; its results and checkpoints are complete")
        return result

    def _save(self) -> None:
        self.checkpoints.save_last(self.state_dict())
        self.clock.saved()

    def _train_epoch(self, epoch: int, meter: Throughput, stop: StopRequest) -> None:
        cfg, rt = self.cfg, self.runtime
        done = self.epoch_step  # > 0 when resumed in mid-epoch
        set_epoch(self.train_loader, epoch, start=done * cfg.train.accumulate)
        switched = self.criterion.set_epoch(epoch)  # loss.schedule: weights of this epoch
        if switched:
            logger.info(switched)
        self.model.train()
        if cfg.train.freeze_bn:
            freeze_batchnorm(self.model)
        bar = Progress(self.steps_per_epoch, f"epoch {epoch + 1}/{cfg.train.epochs}", rt.is_main,
                       initial=done)
        sums: dict[str, torch.Tensor] = {}
        count = 0
        batches = iter(self.train_loader)
        for _ in range(done, self.steps_per_epoch):
            show = bool(cfg.train.image_every) and (self.step + 1) % cfg.train.image_every == 0
            out = self.train_step(itertools.islice(batches, cfg.train.accumulate), show)
            for key, value in out.terms.items():
                sums[key] = sums.get(key, 0) + value
            count += 1
            meter.add(out.images * rt.world_size)
            step_scheduler(self.scheduler)
            self.step += 1
            self.epoch_step += 1
            if self.step % cfg.train.log_every == 0 or self.step == 1:
                postfix = self._log_step(epoch, sums, count, meter)
                sums, count = {}, 0
                bar.update(postfix)
            else:
                bar.update()
            if show:
                self._log_images(out.batch, out.outputs)
            self._after_step(out.terms, stop, epoch)
        bar.close()

    def _after_step(self, terms: dict[str, torch.Tensor], stop: StopRequest, epoch: int) -> None:
        """The once-per-step questions: a diverged step, a stop signal, an in-epoch save."""
        if "nonfinite" in terms:  # the same on every rank: gradients are all-reduced
            self._count_bad_step(terms)
        stopping, saving = self.runtime.any_rank(stop.received is not None,
                                                 self.clock.due(self.step))
        mid_epoch = self.epoch_step < self.steps_per_epoch
        if stopping:
            self._save()
            raise Preempted(f"stopped by {stop.received or 'a signal on another rank'} after "
                            f"step {self.step}; saved {self.checkpoints.last}; continue with "
                            f"--resume auto")
        if saving and mid_epoch:  # epoch ends save in _end_epoch
            self._save()

    def _count_bad_step(self, terms: dict[str, torch.Tensor]) -> None:
        self.bad_steps += 1
        shown = ", ".join(f"{k} {float(v):.4g}" for k, v in terms.items() if k != "nonfinite")
        if self.bad_steps > self.cfg.train.max_bad_steps:
            last = self.checkpoints.last
            kept = f"{last} is untouched" if last.is_file() else "no checkpoint was written"
            raise UserError(
                f"step {self.step}: the gradients are not finite ({shown}); the step was not "
                f"applied and {kept}. {self.bad_steps} such step(s), more than "
                f"train.max_bad_steps={self.cfg.train.max_bad_steps}: lower optim.lr, set "
                f"train.grad_clip, or check the data")
        logger.warning("step %d: non-finite gradients (%s), step skipped (%d of at most %d)",
                       self.step, shown, self.bad_steps, self.cfg.train.max_bad_steps)

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self, pred_root: Path | None) -> EvalResult | None:
        """Every rank evaluates its shard with rank 0's weights and buffers; rank 0 writes.

        Runs after the epoch's save only: a stop during it raises Preempted, and a failure is
        reported with the saved state that ``--resume auto`` continues from (by this
        evaluation, without training again).
        """
        with self._after_save(f"the evaluation of epoch {self.epoch}"):
            result = self._evaluate_and_write(pred_root) if self.test_loaders else None
        self.evaluated = self.epoch
        return result

    def _evaluate_and_write(self, pred_root: Path | None) -> EvalResult:
        rt = self.runtime
        model = self.ema.module if self.ema is not None else self.model
        rt.broadcast_buffers(model)
        save = pred_root if self.cfg.eval.save_predictions else None
        stop = self.stop
        result = evaluate(model, self.test_loaders, rt, self.cfg, save,
                          stop=lambda: stop is not None and stop.received is not None)
        improved = False
        if rt.is_main:
            scalars = result.scalars()
            for name, values in scalars.items():
                self.tb.scalars({f"eval/{name}/{k}": v for k, v in values.items()}, self.step)
            improved = self._update_best(scalars)
            self.tb.flush()
            if pred_root is not None:
                write_eval_outputs(result, self.run_dir)
        improved, self.best = rt.broadcast_object((improved, self.best))
        if improved:  # state_dict gathers from every rank
            self.checkpoints.save_best(self.state_dict())
        return result

    @contextlib.contextmanager
    def _after_save(self, what: str) -> Iterator[None]:
        """Name the saved state in a stop or a failure of ``what`` (it follows a save)."""
        saved = f"the trained state is saved in {self.checkpoints.last} ({self.position()})"
        resume = "--resume auto continues with it, without training again"
        try:
            yield
        except Preempted as exc:
            signal = self.stop.received if self.stop is not None else None
            raise Preempted(f"stopped by {signal or 'a signal on another rank'} during {what} "
                            f"({exc}); {saved}; {resume}") from None
        except UserError as exc:  # one line, exit 2 (a WriteFailed, a DataError, ...)
            raise UserError(f"{what} failed: {exc}. Training is not lost: {saved}; fix the "
                            f"cause, then {resume}") from None
        except Exception:
            logger.error("%s failed (below). Training is not lost: %s; %s", what, saved, resume)
            raise

    def _update_best(self, scalars: dict[str, dict[str, float]]) -> bool:
        value = self.checkpoints.score(scalars, self.cfg.eval)
        if not self.checkpoints.is_better(value, self.best, self.cfg.eval.metric):
            return False
        self.best = {"metric": self.cfg.eval.metric, "value": value, "epoch": self.epoch}
        logger.info("new best %s %.4f at epoch %d", self.cfg.eval.metric, value, self.epoch)
        return True
