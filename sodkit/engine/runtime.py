"""The one place that knows about processes, devices, precision and checkpoint files.

Everything else (networks, losses, metrics, datasets, the training loop) is plain code that asks
the :class:`Runtime` to move tensors, run autocast, step the optimizer, reduce values over ranks
and write files atomically. Under ``torchrun`` the environment variables it sets (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``) select distributed mode; otherwise the run is a single process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ..config import ConfigError, RuntimeCfg
from ..resources import default_threads
from .accel import compile_model, to_channels_last

logger = logging.getLogger(__name__)

_DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class Runtime:
    """Owns rank, device, precision (autocast + GradScaler), seeding and collective helpers."""

    def __init__(self, cfg: RuntimeCfg) -> None:
        self.cfg = cfg
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = self._pick_device(cfg.device)
        torch.set_num_threads(cfg.num_threads or default_threads())
        if self.world_size > 1 and not dist.is_initialized():
            backend = "nccl" if self.device.type == "cuda" else "gloo"
            dist.init_process_group(backend=backend, device_id=self._device_id())
        self.amp_dtype = _DTYPES[cfg.precision]
        if cfg.precision == "fp16" and self.device.type != "cuda":
            raise ConfigError("runtime.precision: fp16 needs a CUDA device; use bf16 or fp32")
        self.scaler = torch.amp.GradScaler("cuda", enabled=cfg.precision == "fp16")
        self.seed_everything(cfg.seed)

    # ------------------------------------------------------------------ setup
    def _pick_device(self, name: str) -> torch.device:
        if name == "auto":
            name = f"cuda:{self.local_rank}" if torch.cuda.is_available() else "cpu"
        device = torch.device(name)
        if device.type == "cuda":
            if not torch.cuda.is_available():
                raise ConfigError(f"runtime.device: {name!r} asked for, but CUDA is not available")
            if device.index is None:
                device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        return device

    def _device_id(self) -> torch.device | None:
        return self.device if self.device.type == "cuda" else None

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
        """Move to the device (channels-last if asked), wrap in DDP under torchrun, compile if
        asked (:mod:`sodkit.engine.accel`)."""
        model = model.to(self.device)
        if self.cfg.channels_last:
            model = model.to(memory_format=torch.channels_last)
        if self.distributed:
            ids = [self.device.index] if self.device.type == "cuda" else None
            model = nn.parallel.DistributedDataParallel(model, device_ids=ids)
        if self.cfg.compile:
            model = compile_model(model, self.device)
        return model

    @staticmethod
    def unwrap(model: nn.Module) -> nn.Module:
        model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper
        return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model

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

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        non_blocking = self.device.type == "cuda"  # overlaps with compute from pinned memory
        batch = {
            k: v.to(self.device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v
            for k, v in batch.items()
        }
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

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.distributed:
            tensor = tensor.clone()
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (picklable objects; used for metric states)."""
        if not self.distributed:
            return [obj]
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        if not self.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def close(self) -> None:
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()

    # ------------------------------------------------------------------ RNG and files
    def rng_state(self) -> dict[str, Any]:
        state = {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    @staticmethod
    def save_atomic(obj: Any, path: str | Path) -> None:
        """torch.save to a temporary file, fsync, then rename: a crash never leaves half a file."""
        save_atomic(obj, path)

    def load(self, path: str | Path) -> dict[str, Any]:
        return load_checkpoint(path)


def save_atomic(obj: Any, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load on CPU; our checkpoints hold numpy RNG states and config dicts, so not weights-only."""
    from ..errors import UserError

    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # a truncated or foreign file: say which
        raise UserError(f"cannot read checkpoint {path}: {exc}") from exc
    if not isinstance(state, dict) or "model" not in state:
        raise UserError(f"{path} is not a sodkit checkpoint (no 'model' entry)")
    return state


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Evaluate with ``no_grad`` in eval mode, restoring the previous mode afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield model
    finally:
        model.train(was_training)
