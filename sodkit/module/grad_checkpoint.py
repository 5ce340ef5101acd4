"""Gradient checkpointing that keeps BatchNorm's running statistics right.

``torch.utils.checkpoint`` (non-reentrant) drops the activations inside a segment after the
forward pass and recomputes them during backward. The recomputation runs every BatchNorm of the
segment a second time in training mode, which would update ``running_mean`` / ``running_var``
twice per step and count ``num_batches_tracked`` twice. Here the recomputation runs under
:func:`frozen_batchnorm_stats` (passed as the recompute half of checkpoint's ``context_fn``): the
BatchNorms still normalise with the batch's statistics, so the recomputed activations and hence
the gradients are exactly those of the plain run, but they leave their buffers alone.

Two ways in, both keeping parameter names and state-dict keys unchanged:

- :func:`checkpoint_segment` runs any function as one segment (a network's decoder level, a run
  of stem layers);
- :func:`checkpoint_blocks` makes each block of a module's block sequences (ResNet's
  ``layer1[0]``, a ConvNeXt stage's ``blocks[i]``, a ViT's ``blocks[i]``) checkpoint itself, by
  giving the block instance its own ``forward``; :func:`uncheckpoint` undoes it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

_CONTAINERS = (nn.Sequential, nn.ModuleList)


@contextlib.contextmanager
def frozen_batchnorm_stats(modules: Iterable[nn.Module]) -> Iterator[None]:
    """BatchNorms in ``modules`` normalise with batch statistics but keep their buffers.

    Momentum 0 makes the running-stat update ``0 * batch + 1 * running``, the same value bit for
    bit, and ``num_batches_tracked`` is put back afterwards. Switching ``track_running_stats``
    off instead would change which tensors BatchNorm saves for backward, which checkpoint's
    recomputation check rejects. Works for ``nn.BatchNorm*``, timm's ``BatchNormAct2d`` and
    ``SyncBatchNorm``; modules in eval mode are untouched.
    """
    changed = [(m, m.momentum, m.num_batches_tracked.clone()) for m in modules
               if isinstance(m, nn.modules.batchnorm._BatchNorm)
               and m.training and m.track_running_stats and m.num_batches_tracked is not None]
    for m, _, _ in changed:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, momentum, tracked in changed:
            m.momentum = momentum
            m.num_batches_tracked.copy_(tracked)


def _contexts(owner: nn.Module) -> tuple[contextlib.AbstractContextManager, ...]:
    return contextlib.nullcontext(), frozen_batchnorm_stats(owner.modules())


def checkpoint_segment(fn: Callable[..., Any], *args: Any, owner: nn.Module) -> Any:
    """``fn(*args)`` as one non-reentrant checkpoint segment; ``owner``'s BatchNorms are frozen
    during the recomputation. Without autograd (evaluation) it is a plain call."""
    if not torch.is_grad_enabled():
        return fn(*args)
    return checkpoint(fn, *args, use_reentrant=False,
                      context_fn=functools.partial(_contexts, owner))


class _CheckpointedForward:
    """Instance-level ``forward`` of a block: its class ``forward`` run as one segment."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module = self.module
        forward = type(module).forward
        if kwargs:
            return checkpoint_segment(lambda *a: forward(module, *a, **kwargs), *args,
                                      owner=module)
        return checkpoint_segment(functools.partial(forward, module), *args, owner=module)


def checkpoint_module(module: nn.Module) -> None:
    """Make every call of ``module`` one checkpoint segment (state-dict keys unchanged)."""
    module.forward = _CheckpointedForward(module)  # type: ignore[method-assign]


def uncheckpoint(root: nn.Module) -> None:
    """Undo :func:`checkpoint_module` on ``root`` and everything below it."""
    for module in root.modules():
        if isinstance(module.__dict__.get("forward"), _CheckpointedForward):
            del module.forward


def is_checkpointed(module: nn.Module) -> bool:
    return isinstance(module.__dict__.get("forward"), _CheckpointedForward)


def _is_block(module: nn.Module) -> bool:
    """A composite layer (has sub-modules) that is not itself a plain container."""
    return not isinstance(module, _CONTAINERS) and any(True for _ in module.children())


def find_blocks(root: nn.Module) -> list[nn.Module]:
    """The blocks of ``root``'s block sequences: members of a Sequential / ModuleList whose
    members are all composite layers; the search does not enter a block once found."""
    children = list(root.children())
    if isinstance(root, _CONTAINERS) and children and all(_is_block(c) for c in children):
        return children
    found: list[nn.Module] = []
    for child in children:
        found.extend(find_blocks(child))
    return found


def checkpoint_blocks(root: nn.Module) -> list[nn.Module]:
    """Checkpoint each block found by :func:`find_blocks`; returns them."""
    blocks = find_blocks(root)
    for block in blocks:
        checkpoint_module(block)
    return blocks
