"""``model.out_indices: auto``: the backbone levels a network needs, picked from timm's
``feature_info`` for any family.

Every network declares the strides it needs (:class:`StrideNeed`): the strides it must have and
those it takes when the family gives them (``optional``: MINet's stride-2 level).
The family's levels are read from a model built on the meta device (no memory, no weights,
milliseconds), so the real model is then built with exactly the levels used. A family that
lacks a required stride is refused with one line that says what it gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import timm
import torch

from ..config.derived import SIZE_KEYS
from ..errors import ConfigError
from ..module.no_init import skip_parameter_init

AUTO = "auto"  # model.out_indices value


@dataclass(frozen=True)
class StrideNeed:
    """The input-to-map strides a network's decoder takes, finest first."""

    required: tuple[int, ...] = (4, 8, 16, 32)
    optional: tuple[int, ...] = ()  # taken when the family has them (MINet's stride 2)

    def all(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.required) | set(self.optional)))


# fpn (P2-P5) and F3Net's code (out2..out5): strides 4-32
STRIDES_4_TO_32 = StrideNeed(required=(4, 8, 16, 32))
# MINet_Res50 takes all five ResNet levels, strides 2-32; a family without a stride-2 map
# (Swin, ConvNeXt, a ViT pyramid) gives it 4-32, which its decoder takes as well
STRIDES_2_TO_32 = StrideNeed(required=(4, 8, 16, 32), optional=(2,))


def family_levels(name: str, kwargs: dict[str, Any]) -> list[tuple[int, int]]:
    """``(stride, channels)`` of each level timm's ``feature_info`` lists for ``name``, in index
    order, read from a model built on the meta device. Empty when it cannot be read (the real
    build then reports the problem).

    Remembered for the process by name and arguments: a meta build still constructs every
    module (a Swin-T's takes about as long as a forward at 64 px), and a process that builds
    the same network again (a benchmark's variants, an export after a load, a test session)
    would pay it each time."""
    args = {k: v for k, v in kwargs.items() if k not in ("out_indices", "features_only")}
    try:
        key = json.dumps([name, args], sort_keys=True)
    except (TypeError, ValueError):  # an argument JSON cannot say: not remembered
        return list(_probe(name, args))
    if key not in _PROBED:
        if len(_PROBED) >= 64:
            _PROBED.clear()
        _PROBED[key] = _probe(name, args)
    return list(_PROBED[key])


_PROBED: dict[str, tuple[tuple[int, int], ...]] = {}  # family_levels' answers, by arguments


def _probe(name: str, args: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    try:  # structure only: no memory, and no initialisation (swin_tiny: 128 -> 37 ms)
        with torch.device("meta"), skip_parameter_init():
            model = timm.create_model(name, pretrained=False, **args)
        info = getattr(model, "feature_info", None) or []
        return tuple((int(d["reduction"]), int(d["num_chs"])) for d in info)
    except Exception:  # noqa: BLE001 - any probe failure: let the real build say what is wrong
        return ()


def pick_indices(name: str, levels: list[tuple[int, int]], need: StrideNeed) -> list[int]:
    """Indices into ``levels`` giving each needed stride once (the deepest level of that stride:
    the last one listed); ConfigError, in one line, when a required stride is missing."""
    by_stride: dict[int, int] = {}
    for index, (stride, _) in enumerate(levels):
        by_stride[stride] = index  # later (deeper) levels of one stride win
    missing = [s for s in need.required if s not in by_stride]
    if missing:
        gives = sorted(by_stride)
        raise ConfigError(
            f"model.backbone: {name!r} gives feature maps at strides {gives}, the network needs "
            f"strides {list(need.required)} (missing {missing}); pick another backbone or set "
            f"model.out_indices to indices into its levels")
    return [by_stride[s] for s in need.all() if s in by_stride]


@dataclass(frozen=True)
class LevelPlan:
    """How to build a backbone: timm's ``out_indices`` (None: its default), the create_model
    kwargs, and ``plain``: a plain ViT whose one map feeds a simple feature pyramid."""

    indices: list[int] | None
    kwargs: dict[str, Any]
    plain: bool = False




def plan_levels(name: str, out_indices: Any, kwargs: dict[str, Any], need: StrideNeed
                ) -> LevelPlan:
    """``out_indices: auto``: the levels giving ``need``'s strides; for a plain ViT (every level
    at its patch stride) the last block, with ``dynamic_img_size`` set where the model takes it
    (any input size; sodkit pads to whole patches), for :mod:`sodkit.backbone.pyramid`.
    A list or None passes through."""
    if out_indices != AUTO:
        if isinstance(out_indices, str):
            raise ConfigError(f"model.out_indices: {out_indices!r} is not 'auto', null or a list "
                              f"of level indices")
        return LevelPlan(None if out_indices is None else list(out_indices), kwargs)
    levels = family_levels(name, kwargs)
    if not levels:
        return LevelPlan(None, kwargs)
    strides = {s for s, _ in levels}
    if len(strides) == 1 and set(need.required) != strides:
        args = dict(kwargs)
        if not set(SIZE_KEYS) & set(args) and family_levels(name, {**args,
                                                                  "dynamic_img_size": True}):
            args["dynamic_img_size"] = True  # accepted: the probe built
        return LevelPlan([len(levels) - 1], args, plain=True)
    return LevelPlan(pick_indices(name, levels, need), kwargs)
