"""The registry of released checkpoints that ``sodkit import-weights`` converts.

A :class:`Release` says everything sodkit needs to know about one published file: the network
and recipe it corresponds to, the inference pipeline its authors measured it with, and how each
of its tensors is named in sodkit. Each network's module in this package registers its releases
(:func:`register`); the package finds those modules by itself, so a new network's weights
(BiRefNet next) are one new module here, and nothing else changes.

Light module: no torch at import (the command's parser lists the formats).
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError

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


_FORMATS: dict[str, Release] = {}
# the package's modules that register no release (the rest each register theirs)
NOT_FORMATS = ("__init__", "formats", "convert", "catalogue", "download", "fetch")
_LOADED = False


def register(release: Release) -> Release:
    if release.name in _FORMATS:
        raise ValueError(f"import format {release.name!r} is registered twice")
    _FORMATS[release.name] = release
    return release


def _load_all() -> None:
    """Import every module of this package once: each registers its releases."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    package = __name__.rsplit(".", 1)[0]
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name not in NOT_FORMATS:
            importlib.import_module(f"{package}.{info.name}")


def format_names() -> list[str]:
    _load_all()
    return sorted(_FORMATS)


def get_format(name: str) -> Release:
    """The release called ``name``; an unknown name is an error listing the known ones."""
    _load_all()
    if name not in _FORMATS:
        close = difflib.get_close_matches(name, list(_FORMATS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown import format {name!r}{hint} (known: "
                        f"{', '.join(sorted(_FORMATS))})")
    return _FORMATS[name]


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
