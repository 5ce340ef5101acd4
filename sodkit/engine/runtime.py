"""The one place that knows about processes, devices, precision and checkpoint files.

Everything else (networks, losses, metrics, datasets, the training loop) is plain code that asks
the :class:`Runtime` to move tensors, run autocast, step the optimizer, reduce values over ranks
and write files atomically. Where this process sits in a job comes from its launcher's
environment, read by :func:`~sodkit.engine.launcher.detect_dist_env` (torch-free, re-exported
here) and nowhere else: ``torchrun``, SLURM's ``srun`` without torchrun, or neither.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..config import ConfigError, RuntimeCfg
from ..resources import default_threads
from ..torchfile import load_checkpoint, save_atomic
from . import rendezvous
from .accel import compile_model, to_channels_last
from .devices import cuda_index, dist_backend
from .launcher import detect_dist_env
from .rng import rng_state, set_rng_state

logger = logging.getLogger(__name__)

_DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16, "fp64": None}


# ---------------------------------------------------------------------- the runtime
class Runtime:
    """Owns rank, device, process group, precision (autocast + GradScaler), seeding, collectives."""

    def __init__(self, cfg: RuntimeCfg) -> None:
        self.cfg = cfg
        self.env = detect_dist_env()
        self.rank, self.world_size = self.env.rank, self.env.world_size
        self.local_rank = self.env.local_rank
        if not self.is_main:  # other ranks print nothing unless they fail
            logging.getLogger().setLevel(logging.ERROR)
            logging.captureWarnings(True)
        self.device = self._pick_device(cfg.device)
        self.backend = dist_backend(cfg.dist_backend, self.device.type)
        self._host_group: Any = None  # gloo group of the host-side collectives (see close)
        torch.set_num_threads(cfg.num_threads or default_threads())
        if self.world_size > 1 and not dist.is_initialized():
            self._init_process_group()
        self.amp_dtype = _DTYPES[cfg.precision]
        # the dtype of weights and inputs: float64 only for runtime.precision fp64
        self.dtype = torch.float64 if cfg.precision == "fp64" else torch.float32
        self.check_precision(cfg.precision, "runtime.precision")
        # the scaler's device type follows the model's (a CPU GradScaler runs the same logic)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=cfg.precision == "fp16")
        self.seed_everything(cfg.seed)

    # ------------------------------------------------------------------ setup
    def _pick_device(self, name: str) -> torch.device:
        """The local rank's GPU (:func:`~sodkit.engine.devices.cuda_index`), made the current
        device before the process group exists: NCCL and the object collectives use it."""
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        device = torch.device(name)
        if device.type == "cuda":
            if not torch.cuda.is_available():
                raise ConfigError(f"runtime.device: {name!r} asked for, but CUDA is not available")
            if device.index is None:
                index = cuda_index(self.local_rank, torch.cuda.device_count())
                device = torch.device("cuda", index)
            torch.cuda.set_device(device)
        return device

    def _init_process_group(self) -> None:
        """NCCL on CUDA, gloo on CPU; a timeout so that a lost peer ends the job, never hangs it.

        NCCL is bound to this rank's device (``device_id``: eager communicator set-up, no guess
        from the global rank). The object collectives and the stop / save decisions get a gloo
        group of their own on every backend (``devices``; :meth:`close` says why on gloo).
        """
        options: dict[str, Any] = {
            "backend": self.backend,
            "timeout": timedelta(seconds=self.cfg.dist_timeout_s),
            "device_id": self.device if self.backend == "nccl" else None,
        }
        if self.env.launcher == "slurm":  # no torchrun store: rendezvous at the first node
            options.update(init_method=f"tcp://{self.env.master_addr}:{self.env.master_port}",
                           rank=self.rank, world_size=self.world_size)
        elif self.env.launcher == "torchrun" and rendezvous.uses_agent_store():
            # the agent's store outlives failed attempts: meet in this attempt's own key space
            store = rendezvous.agent_store(options["timeout"])
            token = rendezvous.attempt_token(store, self.rank, self.world_size, options["timeout"])
            options.update(store=rendezvous.attempt_store(store, token), rank=self.rank,
                           world_size=self.world_size)
        dist.init_process_group(**options)
        # every rank creates it, in the same order (about 2 ms)
        self._host_group = dist.new_group(backend="gloo", timeout=options["timeout"])
        if self.is_main:
            logger.info("distributed: %d processes (%s, %s), master %s", self.world_size,
                        self.env.launcher, options["backend"],
                        self.env.master_addr or os.environ.get("MASTER_ADDR", "?"))

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files, logs and shows progress."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def seed_everything(self, seed: int) -> None:
        """Seed every RNG; each rank gets its own stream so that dropout etc. differ per rank."""
        seed = seed + self.rank
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        if self.cfg.deterministic:
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.backends.cudnn.benchmark = False

    # ------------------------------------------------------------------ model and steps
    def wrap(self, model: nn.Module) -> nn.Module:
        """Move to the device (channels-last if asked); when distributed, convert BatchNorm
        (``sync_bn``) and wrap in DistributedDataParallel (rank 0's weights and buffers are
        broadcast at construction); compile if asked (:mod:`sodkit.engine.accel`)."""
        if self.distributed and self.cfg.sync_bn:
            model = self._sync_batchnorm(model)
        model = model.to(self.device)
        if self.dtype == torch.float64:  # only then: a float32 run keeps any float64 buffer
            model = model.to(dtype=self.dtype)
        if self.cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if self.distributed:
            ids = [self.device.index] if self.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if self.cfg.compile:
            model = compile_model(model, self.device)
        return model

    def _sync_batchnorm(self, model: nn.Module) -> nn.Module:
        """``nn.SyncBatchNorm`` on CUDA (timm's converter: it knows its BatchNormAct layers);
        on CPU, where SyncBatchNorm has no kernel, and over gloo (its all-gathers are NCCL's),
        the all-reduce BatchNorm of sodkit.module."""
        if self.backend == "nccl":
            from timm.layers import convert_sync_batchnorm

            return convert_sync_batchnorm(model)
        from ..module import convert_allreduce_batchnorm

        model, skipped = convert_allreduce_batchnorm(model)
        if skipped:
            logger.warning("runtime.sync_bn on CPU: %s layers keep per-process statistics",
                           ", ".join(sorted(set(skipped))))
        return model

    @staticmethod
    def unwrap(model: nn.Module) -> nn.Module:
        model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model

    def check_precision(self, precision: str, key: str) -> None:
        """Refuse a precision this device cannot run, naming the config key, before any work
        (``eval.precision`` is otherwise first used at the first evaluation, epochs in)."""
        if precision == "fp16" and self.device.type != "cuda":
            raise ConfigError(f"{key}: fp16 needs a CUDA device; use bf16 or fp32")

    def autocast(self, precision: str | None = None) -> contextlib.AbstractContextManager:
        """Autocast at ``runtime.precision``, or at ``precision`` (e.g. ``eval.precision``)."""
        dtype = self.amp_dtype if precision is None else _DTYPES[precision]
        if dtype is None:
            return contextlib.nullcontext()
        if dtype == torch.float16 and self.device.type != "cuda":
            raise ConfigError("precision fp16 needs a CUDA device; use bf16 or fp32")
        return torch.autocast(self.device.type, dtype=dtype)

    def accumulation_context(
        self, model: nn.Module, sync: bool
    ) -> contextlib.AbstractContextManager:
        """Skip DDP's gradient all-reduce on micro-batches that do not end an optimizer step."""
        if self.distributed and not sync and hasattr(model, "no_sync"):
            return model.no_sync()
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, model: nn.Module, grad_clip: float | None
    ) -> torch.Tensor | None:
        """Unscale, clip, step and zero the gradients; returns the gradient norm when clipping."""
        norm = None
        if grad_clip:
            self.scaler.unscale_(optimizer)
            norm = nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        self.scaler.step(optimizer)
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return norm

    def on_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """A batch tensor on the device; floating ones in float64 under ``precision: fp64``."""
        tensor = tensor.to(self.device, non_blocking=self.device.type == "cuda")  # from pinned
        if self.dtype == torch.float64 and tensor.is_floating_point():
            tensor = tensor.to(self.dtype)
        return tensor

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        batch = {k: self.on_device(v) if isinstance(v, torch.Tensor) else v
                 for k, v in batch.items()}
        if self.cfg.channels_last:
            batch = {k: to_channels_last(v) if isinstance(v, torch.Tensor) else v
                     for k, v in batch.items()}
        return batch

    # ------------------------------------------------------------------ collectives
    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            tensor = tensor.clone()
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
            tensor /= self.world_size
        return tensor

    def any_rank(self, *flags: bool) -> list[bool]:
        """Each flag, true if it is true on any rank: decisions every rank must take together
        (stop, save, give up) come from one small all-reduce."""
        if not self.distributed:
            return [bool(f) for f in flags]
        # host values over the gloo group: no device tensor, so no device sync every step
        tensor = torch.tensor([float(f) for f in flags])
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._host_group)
        return [bool(v) for v in tensor.tolist()]

    def gather_to_main(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` in rank order on rank 0 (``None`` elsewhere): metric records and
        RNG states are only needed where files are written, so no rank but 0 receives them."""
        if not self.distributed:
            return [obj]
        out: list[Any] | None = [None] * self.world_size if self.is_main else None
        dist.gather_object(obj, out, dst=0, group=self._host_group)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self._host_group)
        return box[0]

    def broadcast_buffers(self, model: nn.Module) -> None:
        """Rank 0's buffers (BatchNorm statistics) on every rank before an evaluation.

        DDP broadcasts buffers only at the start of a training forward, so after a step each rank
        holds its own running statistics; evaluating with them would mix numbers of several
        models instead of measuring the rank-0 weights that the checkpoint saves.
        """
        if self.distributed:
            for buffer in self.unwrap(model).buffers():
                dist.broadcast(buffer.data, src=0)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def close(self) -> None:
        """Destroy the process groups, and free the host group while the interpreter is whole.

        A gloo worker thread marks a collective done, wakes this thread, and only then lets go
        of the collective's tensors. Where it let go of the last reference to a tensor made in
        Python (``any_rank``'s flags: the last collective of a run), it takes the GIL; if the
        interpreter is already shutting down by then, the thread is ended in the middle of a
        C++ destructor and the process aborts ("terminate called without an active exception",
        SIGABRT). On a busy machine that late thread ended about one run in ten of a restarted
        two-node torchrun job, and torchrun took the finished job for failed. Freeing the host
        group joins its threads (without the GIL); ``destroy_process_group`` alone does not
        (the group lives on while referenced), and the default group cannot be freed this way:
        DistributedDataParallel keeps it alive, so no Python-made tensor goes through it at
        the end of a run.
        """
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()
        self._host_group = None

    # ------------------------------------------------------------------ RNG and files
    def rng_state(self) -> dict[str, Any]:
        """This rank's RNG states (see :func:`rng_state`)."""
        return rng_state(self.device)

    def set_rng_state(self, state: Mapping[str, Any]) -> None:
        set_rng_state(state, self.device)

    @staticmethod
    def save_atomic(obj: Any, path: str | Path) -> None:
        """torch.save to a temporary file, fsync, then rename: a crash never leaves half a file."""
        save_atomic(obj, path)

    def load(self, path: str | Path) -> dict[str, Any]:
        return load_checkpoint(path)


@dataclass
class OnDevice:
    """What the forward (:mod:`sodkit.inference.forward`) asks of a runtime, its device and
    autocast, without a Runtime's process-wide effects (seeding, threads, process group): the
    Python API's and the server's."""

    device: torch.device
    amp_dtype: torch.dtype | None = None

    def autocast(self, precision: str | None = None) -> contextlib.AbstractContextManager:
        return Runtime.autocast(self, precision)  # type: ignore[arg-type]
