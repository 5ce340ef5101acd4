"""Local pretrained weights for a timm features model: read, match keys, load, report.

timm's feature wrappers rename the classifier's modules: ``FeatureListNet`` flattens
``stages.0`` into ``stages_0``, ``FeatureGetterNet`` nests the model under ``model.``,
``FeatureHookNet`` under ``body.``. A classifier checkpoint, a features-model state dict, a
DDP (``module.``) or a sodkit (``backbone.body.``) checkpoint should all load, so keys are matched
exactly first and then by a canonical form that drops those prefixes and treats ``_`` like ``.``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from ..errors import UserError
from ..text import plural
from ..torchfile import read_weights_only

log = logging.getLogger(__name__)

_WRAPPER_PREFIX = re.compile(r"^(?:(?:module|model|body|backbone|_orig_mod)\.)+")
_NESTED_KEYS = ("state_dict", "model")


def read_state_dict(path: str | Path) -> dict[str, Tensor]:
    """Tensors of a ``.pth``/``.pt``/``.safetensors`` file, unnested from "state_dict"/"model"."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise UserError(f"model.pretrained: weights file not found: {path}")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            obj: Any = load_file(str(path), device="cpu")
        except Exception as exc:  # any reader failure is a bad file the user pointed at
            raise UserError(f"model.pretrained: cannot read weights file {path}: {exc}") from exc
    else:  # never unpickles code: tensors and plain types only
        obj = read_weights_only(path, "model.pretrained: weights file")
    for key in _NESTED_KEYS:
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict):
        raise UserError(f"model.pretrained: {path} holds no state dict ({type(obj).__name__})")
    return {k: v for k, v in obj.items() if isinstance(v, Tensor)}


def canonical_key(key: str) -> str:
    """``module.stages_0.blocks.1.conv_dw.weight`` -> ``stages.0.blocks.1.conv.dw.weight``."""
    return _WRAPPER_PREFIX.sub("", key).replace("_", ".")


def match_keys(model_keys: list[str], file_keys: list[str]) -> dict[str, str]:
    """Map model key -> file key: exact names first, then unambiguous canonical names."""
    file_set = set(file_keys)
    mapping = {k: k for k in model_keys if k in file_set}
    by_canon: dict[str, list[str]] = {}
    for k in file_keys:
        by_canon.setdefault(canonical_key(k), []).append(k)
    used = set(mapping.values())
    for k in model_keys:
        if k in mapping:
            continue
        candidates = [c for c in by_canon.get(canonical_key(k), []) if c not in used]
        if len(candidates) == 1:
            mapping[k] = candidates[0]
            used.add(candidates[0])
    return mapping


def load_matching(model: nn.Module, path: str | Path, model_name: str = "") -> dict[str, int]:
    """Load the file's matching tensors into ``model``; log what was loaded, missed and unused.

    Returns counts (``loaded``, ``missing``, ``unused``, ``mismatched``). Every tensor of the
    model must come from the file with its shape (extra file tensors, e.g. a classifier head, are
    fine and logged): a file that does not fit is a UserError with the key counts, since
    training would silently start (partly) from scratch.
    """
    file_sd = read_state_dict(path)
    model_sd = model.state_dict()
    mapping = match_keys(list(model_sd), list(file_sd))
    to_load: dict[str, Tensor] = {}
    mismatched: list[str] = []
    for mkey, fkey in mapping.items():
        if file_sd[fkey].shape == model_sd[mkey].shape:
            to_load[mkey] = file_sd[fkey]
        else:
            mismatched.append(f"{mkey} {tuple(file_sd[fkey].shape)}!={tuple(model_sd[mkey].shape)}")
    if not to_load:
        raise UserError(
            f"model.pretrained: no tensor in {path} matches timm model {model_name!r} "
            f"(file keys like {list(file_sd)[:3]}, model keys like {list(model_sd)[:3]})"
        )
    # BatchNorm's step counters are absent from older (torchvision) files and harmless to miss
    missing = [k for k in model_sd if k not in to_load and not k.endswith("num_batches_tracked")]
    unused = sorted(set(file_sd) - {mapping[k] for k in to_load})
    counts = {"loaded": len(to_load), "missing": len(missing), "unused": len(unused),
              "mismatched": len(mismatched)}
    absent = [k for k in missing if k not in mapping]
    if missing or mismatched:  # half-loaded backbones train, but not as the user expects
        raise UserError(
            f"model.pretrained: {path} does not fit timm model {model_name!r}: "
            f"{len(to_load)} of {plural(len(model_sd), 'tensor')} match, {len(absent)} missing "
            f"from the file (e.g. {absent[:3]}), "
            f"{len(mismatched)} with other shapes (e.g. {mismatched[:2]}), "
            f"{plural(len(unused), 'file tensor')} unused")
    model.load_state_dict(to_load, strict=False)
    log.info("pretrained %s: loaded %d/%s; %s unused (e.g. %s)", path, len(to_load),
             plural(len(model_sd), "tensor"), plural(len(unused), "file tensor"), unused[:3])
    return counts
