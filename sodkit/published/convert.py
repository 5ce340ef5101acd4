"""A released checkpoint -> a sodkit model file: read without unpickling code, checked to be that
release tensor by tensor, renamed, written with the published recipe as its config.

The file is read with ``torch.load(weights_only=True)`` (:func:`sodkit.torchfile.read_weights_only`:
size bounded, a pickle that needs code refused with the globals it asks for), or as safetensors
when it is a ``.safetensors`` file (BiRefNet's Hugging Face release). Training scripts
wrap state dicts in DDP (``module.``) or ``torch.compile`` (``_orig_mod.``): both prefixes are
stripped, as the authors' loaders do. Half-precision tensors (F3Net's apex O2) load as float32.
Then every tensor must have a sodkit name in the recipe's network, with its shape, and every
tensor of that network must come from the file (but the release's declared ``fresh`` parts and
BatchNorm's ``num_batches_tracked`` counters, which older files lack): otherwise the file is
not that release, and the error gives the counts and the first names of each kind.
A release published in variants (BiRefNet's backbones) first reads which one the file is
(:attr:`Release.variant`): its config keys go into the model file's config, its rename is used.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import UserError
from .formats import Release, recipe_path

if TYPE_CHECKING:
    from ..outputs import OutputFolder

logger = logging.getLogger(__name__)

PREFIXES = ("module.", "_orig_mod.")  # DDP, torch.compile
_WRAPPERS = ("state_dict", "model", "net_state", "net")  # dicts a state dict may sit in
_SHOW = 3


def release_state_dict(path: Path, release: Release) -> tuple[dict[str, torch.Tensor], int]:
    """The file's tensors under their original names, prefixes stripped, floats as float32;
    and how many were half precision."""
    from ..model_file import is_model_file, read_safetensors
    from ..torchfile import read_weights_only

    obj = read_safetensors(path)[0] if is_model_file(path) else read_weights_only(
        path, f"{release.file} ({release.name})")
    state = _unwrap(obj)
    if state is None:
        raise UserError(f"{path} is not {release.title}'s {release.file}: it holds a "
                        f"{type(obj).__name__}, not a state dict (a mapping of names to "
                        f"tensors)")
    weights: dict[str, torch.Tensor] = {}
    halves = 0
    for key, value in state.items():
        name = strip_prefixes(str(key))
        if name in weights:
            raise UserError(f"{path}: tensor {name!r} appears twice (with and without a "
                            f"{'/'.join(PREFIXES)} prefix)")
        if value.is_floating_point() and value.dtype != torch.float32:
            halves += value.dtype in (torch.float16, torch.bfloat16)
            value = value.float()
        weights[name] = value
    return weights, halves


def _unwrap(obj: Any) -> dict[str, torch.Tensor] | None:
    def tensors(d: Any) -> bool:
        return isinstance(d, dict) and bool(d) and all(
            isinstance(v, torch.Tensor) for v in d.values())

    if tensors(obj):
        return obj
    if isinstance(obj, dict):
        for key in _WRAPPERS:
            if tensors(obj.get(key)):
                return obj[key]
    return None


def strip_prefixes(key: str) -> str:
    """``module._orig_mod.x`` -> ``x``: DDP's and torch.compile's wrappers, in any order."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in PREFIXES:
            if key.startswith(prefix):
                key, stripped = key[len(prefix):], True
    return key


def _first(items: list[str]) -> str:
    return ", ".join(items[:_SHOW]) + (", ..." if len(items) > _SHOW else "")


def match_release(weights: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                  release: Release, source: Path) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``weights`` (original names) renamed to sodkit's and checked against ``expected`` (the
    network's state dict, shapes only); returns them and the sodkit keys still to fill."""
    renamed: dict[str, torch.Tensor] = {}
    unexpected, shapes = [], []
    for key, value in weights.items():
        new = release.rename(key)
        if new == "":
            continue  # no weights (a recomputed buffer)
        if new not in expected:
            unexpected.append(key)
        elif tuple(value.shape) != tuple(expected[new].shape):
            shapes.append(f"{key} {list(value.shape)} (expected {list(expected[new].shape)})")
        renamed[new] = value
    optional = [k for k in expected if k not in renamed and k.endswith("num_batches_tracked")]
    fresh = [k for k in expected if k not in renamed and k.startswith(release.fresh)] \
        if release.fresh else []
    missing = [k for k in expected if k not in renamed and k not in optional and k not in fresh]
    problems = []
    if unexpected:
        problems.append(f"{len(unexpected)} tensors that release does not have "
                        f"({_first(unexpected)})")
    if missing:
        problems.append(f"{len(missing)} of its tensors missing (sodkit names: "
                        f"{_first(missing)})")
    if shapes:
        problems.append(f"{len(shapes)} of the wrong shape ({_first(shapes)})")
    if problems:
        raise UserError(f"{source} is not {release.title}'s {release.file} ({len(weights)} "
                        f"tensors; that release has {len(expected) - len(fresh)}): "
                        f"{'; '.join(problems)}. Nothing was written")
    return renamed, optional + fresh


def _fill(net: torch.nn.Module, keys: list[str]) -> dict[str, torch.Tensor]:
    """Fresh values for the sodkit tensors a release lacks: a zero ``num_batches_tracked``;
    the owning module's own initialisation (seeded) for the rest."""
    values: dict[str, torch.Tensor] = {}
    owners = sorted({k.rsplit(".", 1)[0] for k in keys if not k.endswith("num_batches_tracked")})
    torch.manual_seed(0)
    for owner in owners:
        module = net.get_submodule(owner).to_empty(device="cpu")
        if not hasattr(module, "reset_parameters"):
            raise UserError(f"cannot initialise {owner} afresh (no reset_parameters)")
        module.reset_parameters()
        for leaf, tensor in module.state_dict().items():
            values[f"{owner}.{leaf}"] = tensor.detach().clone()
    for key in keys:
        if key.endswith("num_batches_tracked"):
            values[key] = torch.tensor(0, dtype=torch.long)
    return values


def release_config(release: Release, recipe: str | Path | None = None) -> dict[str, Any]:
    """The published recipe as a resolved config dict: no backbone download (the weights are
    the release's) and the authors' inference pipeline."""
    from ..config import load_config, to_dict

    cfg = load_config(recipe_path(release, recipe))
    cfg = replace(cfg, model=replace(cfg.model, pretrained=None),
                  data=replace(cfg.data, preprocess=release.preprocess))
    return to_dict(cfg)


def import_weights(release: Release, source: str | Path, out: str | Path,
                   recipe: str | Path | None = None, data: dict[str, Any] | None = None,
                   about: dict[str, Any] | None = None, target: OutputFolder | None = None
                   ) -> dict[str, Any]:
    """Convert ``source`` into the model file ``out``; returns the provenance written.
    ``data``: ``data.*`` keys of the recipe to replace (a release's inference profile, e.g. its
    input side); ``about``: more provenance (the catalogue's name and URL); ``target``: the
    output folder the command checked ``out`` in (its rules apply, and the file is recorded
    there); without one, ``out`` is written as it is."""
    from ..config.loader import stored_config
    from ..model_file import file_sha256, model_file_bytes, write_model_file
    from ..network import build_network
    from ..progress import Progress

    source = Path(source).expanduser()
    config = release_config(release, recipe)  # a missing recipe fails before the big read
    config["data"].update(data or {})
    logger.info("import-weights: %s (%s) -> %s: reading it, checking every tensor against the "
                "release, writing the model file", source, release.name, out)
    with Progress(4, "import-weights", unit="stage", summary=True) as progress:
        weights, halves = release_state_dict(source, release)
        progress.update(postfix=f"read {len(weights)} tensors")
        if release.variant is not None:  # which of the release's variants the file is
            found = release.variant(weights, source)
            release = replace(release, title=found.title, rename=found.rename)
            config["model"].update(found.model)
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            net = build_network(stored_config(config, source).model)
        renamed, fill = match_release(weights, net.state_dict(), release, source)
        renamed.update(_fill(net, fill))
        progress.update(postfix=f"every tensor is {release.title}'s")
        fresh = sorted({k.rsplit(".", 1)[0] for k in fill
                        if not k.endswith("num_batches_tracked")})
        provenance = {"source": source.name, "sha256": file_sha256(source),
                      "format": release.name, "weights": "released",
                      "released_as": release.title, "half_to_float32": halves, "fresh": fresh,
                      **(about or {})}
        progress.update(postfix="sha256 of the source")
        if target is not None:
            target.write_bytes(Path(out), model_file_bytes(renamed, config, provenance))
        else:
            write_model_file(out, renamed, config, provenance)
        progress.update(postfix=f"wrote {out}")
    logger.info("%s: %d tensors of %s (%d half precision, loaded as float32)%s -> %s",
                source, len(weights), release.title, halves,
                f"; left at their fresh initialisation: {', '.join(fresh)}" if fresh else "",
                out)
    return provenance
