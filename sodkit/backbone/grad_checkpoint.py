"""Gradient checkpointing of a timm features model, per block or per stage.

timm's own ``set_grad_checkpointing`` on a ``features_only`` model checkpoints per stage for
``FeatureListNet`` bodies (ResNet, ...), skips the first and the last module, and cannot be told to
leave BatchNorm statistics alone during the recomputation. sodkit checkpoints instead:

- ``block`` (the default, it saves the most; ``benchmarks/RESULTS.md``): every block of every
  block sequence is its own segment
  (:func:`~sodkit.module.grad_checkpoint.checkpoint_blocks`), and in a
  ``FeatureListNet``/``FeatureDictNet`` body the loose layers between block sequences (a ResNet's
  conv1 / bn1 / act1 / maxpool stem, whose stride-2 maps are the largest of all) are grouped into
  one segment per run, cut at the feature maps the decoder takes; a run that is a convolution
  followed by per-channel layers on the image (the ResNet stem) runs as one segment per group of
  output channels (:mod:`~sodkit.module.channel_split`), so that its backward, the last of the
  step, when every parameter gradient exists, holds a quarter of its large maps at once;
- ``stage``: in a ``FeatureDictNet`` body, one segment from one returned feature map to the next
  (other bodies fall back to ``block``);
- ``timm``: timm's own ``set_grad_checkpointing`` (for measurements only: it counts BatchNorm
  statistics twice), on the features model or on the model a ``FeatureGetterNet`` wraps.

Transformer families need nothing more: their blocks sit in block sequences (a ViT's
``blocks``, a Swin / PVTv2 stage's ``blocks``), so ``block`` checkpoints every transformer block
as timm's ``set_grad_checkpointing`` would, and keeps the gradients bit for bit those of the
plain step (``tests/test_checkpointing_transformers.py``).
"""

from __future__ import annotations

import logging
from typing import Literal

from torch import Tensor, nn

from ..module.channel_split import run_split
from ..module.grad_checkpoint import (
    checkpoint_blocks,
    checkpoint_segment,
    find_blocks,
    uncheckpoint,
)

logger = logging.getLogger(__name__)

Granularity = Literal["block", "stage", "timm"]

# A plan is a list of segments: (names of consecutive body children, the same children as a
# ModuleList whose BatchNorms freeze during recomputation, or None: run without checkpointing).
Plan = list[tuple[list[str], "nn.ModuleList | None"]]


def is_dict_body(body: nn.Module) -> bool:
    """timm's ``FeatureDictNet`` family: children run in order, some of them returned."""
    return isinstance(body, nn.ModuleDict) and isinstance(getattr(body, "return_layers", None),
                                                          dict)


def plan_segments(body: nn.ModuleDict, granularity: Granularity) -> Plan:
    """Group a ``FeatureDictNet`` body's children into segments ending at returned maps.

    ``block``: a child holding block sequences runs as itself (its blocks checkpoint
    themselves); runs of other children form one checkpointed segment each. ``stage``: every run
    of children up to a returned map is one checkpointed segment.
    """
    runs: list[tuple[list[str], bool]] = []
    current: list[str] = []
    for name, module in body.items():
        if granularity == "block" and find_blocks(module):
            if current:
                runs.append((current, True))
                current = []
            runs.append(([name], False))
        else:
            current.append(name)
        if name in body.return_layers and current:
            runs.append((current, True))
            current = []
    if current:
        runs.append((current, True))
    return [(names, nn.ModuleList(body[n] for n in names) if ckpt else None)
            for names, ckpt in runs]


def _run_children(body: nn.ModuleDict, names: list[str], x: Tensor) -> Tensor:
    for name in names:
        x = body[name](x)
    return x


def run_plan(body: nn.ModuleDict, plan: Plan, x: Tensor) -> list[Tensor]:
    """The body's returned feature maps, computed segment by segment."""
    feats: list[Tensor] = []
    for names, owner in plan:
        if owner is not None:
            split = run_split(owner, x)  # None: not a convolution-led run on the image
            x = split if split is not None else checkpoint_segment(_run_children, body, names,
                                                                   x, owner=owner)
        else:
            x = _run_children(body, names, x)
        if names[-1] in body.return_layers:
            feats.append(x)
    return feats


def enable(body: nn.Module, granularity: Granularity) -> Plan | None:
    """Switch checkpointing on; returns the segment plan the backbone runs (None: body runs)."""
    disable(body)
    if granularity == "timm":
        target = _timm_target(body)
        if target is None:
            raise ValueError(f"{type(body).__name__} has no set_grad_checkpointing")
        target.set_grad_checkpointing(True)
        return None
    if is_dict_body(body) and not getattr(body, "concat", False):
        plan = plan_segments(body, granularity)
        if granularity == "block":
            checkpoint_blocks(body)
        return plan
    blocks = checkpoint_blocks(body)
    if not blocks:
        logger.warning("%s: no block sequences found; backbone checkpointing has no effect",
                       type(body).__name__)
    return None


def _timm_target(body: nn.Module) -> nn.Module | None:
    """What timm's ``set_grad_checkpointing`` is called on: the features model, or the model a
    ``FeatureGetterNet`` wraps (ViT, Swin, ...: ``body.model``)."""
    for module in (body, getattr(body, "model", None)):
        if module is not None and hasattr(module, "set_grad_checkpointing"):
            return module
    return None


def disable(body: nn.Module) -> None:
    uncheckpoint(body)
    target = _timm_target(body)
    if target is not None and getattr(target, "grad_checkpointing", False):
        target.set_grad_checkpointing(False)
