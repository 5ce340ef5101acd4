"""``model.init_from``: a new run starting from a trained model's weights (fine-tuning).

The source is a sodkit checkpoint (its EMA average when it has one, unless
``model.init_weights: model``), a sodkit model file, or a weights file in sodkit's tensor names
(a ``.safetensors`` file without sodkit metadata, or a weights-only ``.pt`` state dict). Only
``model`` / ``ema`` / ``config`` are read from a checkpoint: optimizer, schedule and epochs
start afresh. Files are read without unpickling code and with their sizes bounded, like every
checkpoint (:mod:`sodkit.torchfile`, :mod:`sodkit.model_file`).

Strict: a tensor of the network that the file lacks, a tensor of the file that the network
lacks, or one of another shape is an error before any work, naming the counts and the first
names of each kind; ``model.init_exclude`` leaves parts at their fresh initialisation. The
returned record (file, sha256, what was loaded and left fresh) goes into the log, the
checkpoints and the run report, so that a fine-tuned model says where it started.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import ConfigError, UserError

KEY = "model.init_from"
_PREFIXES = ("module.", "_orig_mod.")  # DDP and torch.compile wrappers
_SHOWN = 3  # names shown per kind of mismatch
TAKES = ("model.init_from takes a sodkit checkpoint (.pt), a model file (.safetensors) or a "
         "weights file in sodkit's tensor names (.safetensors, or a weights-only .pt)")


def strip_prefixes(weights: dict[str, Any]) -> dict[str, Any]:
    """Tensor names without the leading ``module.`` / ``_orig_mod.`` that a DDP-wrapped or
    compiled network's ``state_dict`` adds (both, in any order)."""
    out = {}
    for name, value in weights.items():
        while name.startswith(_PREFIXES):
            name = name.split(".", 1)[1]
        out[name] = value
    return out


def _from_checkpoint(state: dict[str, Any], init_weights: str) -> tuple[dict[str, Any], str]:
    """The EMA weights (``ema`` as :meth:`EMA.state_dict` saves it, ``{"model": weights,
    ...}``, or as bare weights) when asked for and present; else the model's."""
    ema = state.get("ema")
    if init_weights == "ema" and isinstance(ema, dict):
        if isinstance(ema.get("model"), dict):
            return ema["model"], "ema"
        if ema and all(_is_tensor(v) for v in ema.values()):
            return ema, "ema"
    return state["model"], "model"


def read_source(path: Path, init_weights: str = "ema") -> dict[str, Any]:
    """``{"weights", "config" (a plain dict or None), "kind", "weights_of"}`` of ``path``.

    Raises:
        UserError: the file is missing, unreadable, needs pickled code, or holds no weights.
    """
    from ..model_file import FORMAT, is_model_file, read_model_file, read_safetensors
    from ..torchfile import read_weights_only

    if path.is_dir():
        raise UserError(f"{KEY}: {path} is a folder; give a file, e.g. "
                        f"{path / 'checkpoints' / 'best.pt'}")
    if not path.is_file():
        raise UserError(f"{KEY}: file not found: {path}")
    if is_model_file(path):
        tensors, metadata = read_safetensors(path)
        if metadata.get("format") != FORMAT:
            return {"weights": tensors, "config": None, "kind": "weights file",
                    "weights_of": "file"}
        state = read_model_file(path)
        provenance = state.get("provenance") or {}
        return {"weights": state["model"], "config": state.get("config"), "kind": "model file",
                "weights_of": str(provenance.get("weights", "model"))}
    obj = read_weights_only(path, what=f"{KEY} file", takes=TAKES)
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        weights, which = _from_checkpoint(obj, init_weights)
        kind = "checkpoint" if isinstance(obj.get("config"), dict) else "weights file"
        return {"weights": weights, "config": obj.get("config") if kind == "checkpoint" else None,
                "kind": kind, "weights_of": which}
    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if isinstance(obj, dict) and obj and all(_is_tensor(v) for v in obj.values()):
        return {"weights": obj, "config": None, "kind": "weights file", "weights_of": "file"}
    raise UserError(f"{KEY}: {path} holds no weights (neither a sodkit checkpoint nor a state "
                    f"dict of tensors); give a checkpoint, a model file or a weights file")


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _excluded(name: str, prefixes: list[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def check_exclude(mine: dict[str, Any], weights: dict[str, Any], prefixes: list[str]) -> None:
    """Every ``model.init_exclude`` prefix names some tensor of the network or of the file (a
    typo would otherwise load what it meant to leave out, or fail for another reason)."""
    for prefix in prefixes:
        if not any(_excluded(name, [prefix]) for name in (*mine, *weights)):
            modules = sorted({".".join(n.split(".")[:i]) for n in mine for i in (1, 2)})
            close = difflib.get_close_matches(prefix, modules, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            tops = ", ".join(n for n in modules if "." not in n)
            raise ConfigError(f"model.init_exclude: {prefix!r} matches no tensor of this "
                              f"network or of the file{hint} (the network's parts: {tops})")


def _shown(names: list[str]) -> str:
    more = f", ... {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def mismatch(mine: dict[str, Any], weights: dict[str, Any], prefixes: list[str]
             ) -> dict[str, list[str]]:
    """``{"missing", "unexpected", "shape"}``: names outside ``prefixes`` that do not fit (a
    prefix leaves out the network's tensors and the file's alike: a file's extra head too)."""
    kept = [n for n in mine if not _excluded(n, prefixes)]
    return {"missing": [n for n in kept if n not in weights],
            "unexpected": [n for n in weights if n not in mine and not _excluded(n, prefixes)],
            "shape": [n for n in kept if n in weights
                      and tuple(weights[n].shape) != tuple(mine[n].shape)]}


def mismatch_message(path: Path, bad: dict[str, list[str]], mine: dict[str, Any],
                     weights: dict[str, Any], changed: list[str]) -> str:
    """One line: the counts and first names of each kind, and how to exclude."""
    parts = []
    if bad["missing"]:
        parts.append(f"{len(bad['missing'])} missing from the file ({_shown(bad['missing'])})")
    if bad["unexpected"]:
        parts.append(f"{len(bad['unexpected'])} unexpected, not in this network "
                     f"({_shown(bad['unexpected'])})")
    if bad["shape"]:
        first = bad["shape"][0]
        parts.append(f"{len(bad['shape'])} of another shape (e.g. {first}: "
                     f"{list(weights[first].shape)} in the file, {list(mine[first].shape)} here)")
    tops = list(dict.fromkeys(n.split(".")[0] for kind in bad.values() for n in kind))
    why = f"; it was trained with {', '.join(changed)}" if changed else ""
    return (f"{KEY}: {path} does not fit this network: {'; '.join(parts)}{why}. Use the "
            f"source's model.* settings, or leave parts at their fresh initialisation with "
            f"model.init_exclude=[{', '.join(tops[:3])}] (dotted name prefixes)")


def init_model(net: Any, cfg: Config) -> dict[str, Any] | None:
    """Load ``cfg.model.init_from`` into ``net`` (unwrapped, before DDP or EMA copies it);
    the record of what was loaded, or None when the key is unset.

    Raises:
        UserError: the file cannot be read or does not fit (before any work is done).
        ConfigError: an ``init_exclude`` prefix matches nothing.
    """
    model = cfg.model
    if not model.init_from:
        return None
    from ..model_file import file_sha256
    from .resume import model_differences

    path = Path(model.init_from).expanduser().absolute()
    mine = net.state_dict()
    source = read_source(path, model.init_weights)
    weights = strip_prefixes(source["weights"])
    odd = next((k for k, v in weights.items() if not _is_tensor(v)), None)
    if odd is not None:
        raise UserError(f"{KEY}: {path}: its weight {odd!r} is a {type(weights[odd]).__name__}, "
                        f"not a tensor (a damaged file, or not a set of weights)")
    check_exclude(mine, weights, model.init_exclude)
    bad = mismatch(mine, weights, model.init_exclude)
    if any(bad.values()):
        changed = model_differences(source["config"] or {}, cfg)
        raise UserError(mismatch_message(path, bad, mine, weights, changed))
    loaded = {n: weights[n] for n in mine if not _excluded(n, model.init_exclude)}
    net.load_state_dict(loaded, strict=False)
    record = {"file": str(path), "sha256": file_sha256(path), "kind": source["kind"],
              "weights": source["weights_of"], "loaded": len(loaded),
              "fresh": len(mine) - len(loaded), "exclude": list(model.init_exclude)}
    return record
