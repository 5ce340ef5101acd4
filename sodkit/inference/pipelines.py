"""The inference pipelines by name (``data.preprocess``): each one input side (image -> the
network's input, :mod:`sodkit.inference.preprocess`) and its output side (the network's scores
-> the mask at the image's size, :mod:`sodkit.inference.postprocess`), registered together, so
that a model's masks are made the way its authors made theirs from the name alone.

A transform carries its pipeline's name (``transform.preprocess``): whoever holds the transform
(a test loader's dataset, ``sodkit predict``, the server, the API) finds the output side with
:func:`postprocess_of`. A new pipeline is one :func:`_register` line here and its two halves.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..config.schema import DataCfg, Preprocess
from ..errors import ConfigError
from ..registry import Registry
from . import postprocess as post
from . import preprocess as pre

Transform = Callable[[np.ndarray], torch.Tensor]  # uint8 RGB (H, W, 3) -> float32 (3, S, S)
PREPROCESSING: tuple[str, ...] = typing.get_args(Preprocess)  # checked by the config loader too


@dataclass(frozen=True)
class Pipeline:
    """One inference pipeline: its input side (a transform class, built from ``data`` and the
    input side) and its output side."""

    name: str
    preprocess: Callable[[DataCfg, int], Transform]
    postprocess: post.Postprocess

    def transform(self, cfg: DataCfg, size: int) -> Transform:
        return self.preprocess(cfg, size)


PIPELINES: Registry[Any] = Registry("inference pipeline")  # name -> Pipeline


def _register(pipeline: Pipeline) -> None:
    PIPELINES.register(pipeline.name)(pipeline)


_register(Pipeline("sodkit", pre.TestTransform, post.Postprocess()))
_register(Pipeline("minet", pre.MINetTransform, post.MINetPostprocess()))
_register(Pipeline("f3net", pre.F3NetTransform, post.F3NetPostprocess()))
_register(Pipeline("birefnet", pre.BiRefNetTransform, post.BiRefNetPostprocess()))
_register(Pipeline("birefnet-card", pre.BiRefNetCardTransform, post.BiRefNetCardPostprocess()))


def preprocess_name(cfg: DataCfg) -> str:
    """``data.preprocess`` checked, ``null`` read as ``sodkit``."""
    name = cfg.preprocess or "sodkit"
    if name not in PREPROCESSING or name not in PIPELINES:
        raise ConfigError(f"data.preprocess: unknown inference pipeline {name!r} (known: "
                          f"{', '.join(PREPROCESSING)}; null: the checkpoint's own, else "
                          f"sodkit)")
    return name


def pipeline_of(cfg: DataCfg) -> Pipeline:
    """``data.preprocess``'s pipeline (checked: :func:`preprocess_name`)."""
    return PIPELINES.get(preprocess_name(cfg))


def build_test_transform(cfg: DataCfg, size: int | None = None) -> Transform:
    """The inference transform at ``size`` (default ``cfg.size``) of ``data.preprocess``'s
    pipeline: unset, sodkit's :class:`~sodkit.inference.preprocess.TestTransform`; an author's
    name, that author's own inference preprocessing. Test loaders, ``predict``, the server and
    the API use it; the transform's ``preprocess`` attribute names its output side."""
    return pipeline_of(cfg).transform(cfg, size or cfg.size)


def postprocess_of(transform: object) -> post.Postprocess:
    """The output side that goes with an inference transform (sodkit's for any other)."""
    name = getattr(transform, "preprocess", "sodkit")
    return PIPELINES.get(name if name in PIPELINES else "sodkit").postprocess
