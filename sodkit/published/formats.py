"""The registry of released checkpoints that ``sodkit import-weights`` converts.

A :class:`Release` says everything sodkit needs to know about one published file: the network
and recipe it corresponds to, the inference pipeline its authors measured it with, and how each
of its tensors is named in sodkit. Each network's module in this package registers its releases
(:func:`register`) in :data:`FORMATS`, sodkit's one :class:`~sodkit.registry.Registry`; a new
network's weights are one new module here, named in :data:`FORMAT_MODULES` (imported on first
use, so that the command's parser stays light).

Light module: no torch at import (the command's parser lists the formats).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..registry import Registry

RECIPES = Path(__file__).resolve().parents[2] / "configs"  # a source checkout's recipes


@dataclass(frozen=True)
class Release:
    """One published checkpoint and how it becomes a sodkit model."""

    name: str  # the FORMAT argument, e.g. "minet-r50"
    title: str  # what the file is, for messages: "MINet_Res50 (lartpang/MINet)"
    file: str  # the released file's name: MINet_Res50.pth
    recipe: str  # the published recipe under configs/: its config goes into the model file
    preprocess: str  # data.preprocess: the authors' inference pipeline
    # an original state-dict key -> sodkit's key; "" for a tensor that holds no weights (a
    # buffer the network recomputes, e.g. Swin's relative_position_index): dropped
    rename: Callable[[str], str]
    download: str  # where the authors publish it
    # sodkit tensors the release has no counterpart for, by key prefix; they keep the
    # network's fresh initialisation (MINet's optional side heads)
    fresh: tuple[str, ...] = ()
    # a release published in several variants (BiRefNet: one file per backbone): reads which
    # one a file is from its tensors (original names, prefixes stripped) before the check
    variant: Callable[[Mapping[str, Any], Path], Variant] | None = None


@dataclass(frozen=True)
class Variant:
    """What a file of a multi-variant release is: its title for messages, the ``model`` config
    keys it fixes (e.g. ``backbone``) and the rename of its tensors."""

    title: str
    rename: Callable[[str], str]
    model: dict[str, Any] = field(default_factory=dict)


FORMATS: Registry[Release] = Registry("import format")
FORMAT_MODULES = ("minet", "f3net", "birefnet")  # this package's modules that register releases
_LOADED = False


def register(release: Release) -> Release:
    return FORMATS.add(release.name, release)


def _load_all() -> None:
    """Import the format modules once: each registers its releases."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = __name__.rsplit(".", 1)[0]
    for name in FORMAT_MODULES:
        importlib.import_module(f"{package}.{name}")


def format_names() -> list[str]:
    _load_all()
    return FORMATS.names()


def get_format(name: str) -> Release:
    """The release called ``name``; an unknown name is an error listing the known ones."""
    _load_all()
    if name not in FORMATS:
        close = difflib.get_close_matches(name, FORMATS.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown import format {name!r}{hint} (known: "
                        f"{', '.join(FORMATS.names())})")
    return FORMATS[name]


def recipe_path(release: Release, given: str | Path | None = None) -> Path:
    """The recipe file whose config the model file records: ``given``, or the source
    checkout's ``configs/<recipe>``."""
    path = Path(given).expanduser() if given else RECIPES / release.recipe
    if not path.is_file():
        where = f"--recipe {given}" if given else f"configs/{release.recipe}"
        raise UserError(f"recipe not found: {path} ({where}); the published recipes ship with "
                        f"sodkit's source, not its installed package: pass --recipe "
                        f"PATH/TO/{release.recipe}")
    return path
