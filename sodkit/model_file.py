"""Model files: a trained network in one ``.safetensors`` file, for using it rather than resuming.

A training checkpoint is a pickle with the optimizer, scheduler and RNG state of a run; a model
file holds only what inference and fine-tuning read: the weights (the EMA average when the run
kept one) and, in the safetensors metadata, the resolved config and where the weights came from.
Reading one never unpickles anything: safetensors is a JSON header and raw tensor bytes.

:func:`read_model_file` returns the same shape of dict as
:func:`sodkit.torchfile.load_checkpoint` (``model`` and ``config``, plus ``provenance``), so every
command that takes a checkpoint takes a model file through that one function.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .errors import UserError
from .limits import check_file_size

FORMAT = "sodkit-model/1"
SUFFIX = ".safetensors"
_META_FORMAT, _META_CONFIG, _META_PROVENANCE = "format", "sodkit.config", "sodkit.provenance"
_MAGIC_MAX_HEADER = 100 << 20  # safetensors' own limit on the JSON header


def is_model_file(path: str | Path) -> bool:
    """A ``.safetensors`` file (by name: a model file passed as a checkpoint is told apart
    before anything is read)."""
    return Path(path).suffix.lower() == SUFFIX


def file_sha256(path: str | Path) -> str:
    """The file's sha256, read in 1 MiB blocks (memory bounded for any size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _plain_tensors(weights: dict[str, Any]) -> dict[str, Any]:
    """Contiguous CPU tensors that share no storage (safetensors refuses shared or strided
    tensors, which a state dict may hold: tied weights, transposed views)."""
    import torch

    out: dict[str, Any] = {}
    seen: set[int] = set()
    for key, value in weights.items():
        if not isinstance(value, torch.Tensor):
            raise UserError(f"model file: weight {key!r} is a {type(value).__name__}, not a tensor")
        tensor = value.detach().to("cpu").contiguous()
        if tensor.numel() and tensor.untyped_storage().data_ptr() in seen:
            tensor = tensor.clone()
        if tensor.numel():
            seen.add(tensor.untyped_storage().data_ptr())
        out[key] = tensor
    return out


def model_file_bytes(weights: dict[str, Any], config: dict[str, Any],
                     provenance: dict[str, Any]) -> bytes:
    """A model file's content: ``weights`` with ``config`` (a resolved config as a plain dict)
    and ``provenance`` (source, sha256, format, weights, ...; ``sodkit_version`` is added)."""
    from safetensors.torch import save

    from .version import __version__

    metadata = {_META_FORMAT: FORMAT, _META_CONFIG: json.dumps(config, sort_keys=True),
                _META_PROVENANCE: json.dumps({"sodkit_version": __version__, **provenance},
                                             sort_keys=True)}
    return save(_plain_tensors(weights), metadata=metadata)


def write_model_file(path: str | Path, weights: dict[str, Any], config: dict[str, Any],
                     provenance: dict[str, Any]) -> Path:
    """Write :func:`model_file_bytes` to ``path``, whole or not at all."""
    from .atomic import write_atomic

    return write_atomic(path, model_file_bytes(weights, config, provenance))


def from_checkpoint(state: dict[str, Any], source: str | Path, which: str = "auto"
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(weights, provenance)`` of a model file made from a loaded checkpoint (or model file)
    ``state`` read from ``source``: the EMA weights when it has them unless ``which`` is
    ``model``; the provenance names the file, its sha256, its format and which weights."""
    from .checkpoint_weights import check_finite_weights, pick_weights

    source = Path(source)
    name, weights = pick_weights(state, which, source)
    check_finite_weights(weights, name, source)
    provenance: dict[str, Any] = {
        "source": source.name, "sha256": file_sha256(source),
        "format": FORMAT if state.get("model_file") else "sodkit-checkpoint", "weights": name}
    for key in ("epoch", "step", "best"):
        if state.get(key) is not None:
            provenance[key] = state[key]
    return weights, provenance


def _header(path: Path) -> dict[str, Any]:
    """The safetensors JSON header, its declared length checked against the file's size before
    it is read (a hostile file may declare any length)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise UserError(f"{path} is not a safetensors file (shorter than its header)")
        length = int.from_bytes(head, "little")
        if length > min(size - 8, _MAGIC_MAX_HEADER):
            raise UserError(f"{path} is not a safetensors file (its header declares {length} "
                            f"bytes; the file has {size})")
        try:
            header = json.loads(fh.read(length))
        except ValueError:
            raise UserError(f"{path} is not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise UserError(f"{path} is not a safetensors file (its header is not a JSON object)")
    return header


def read_safetensors(path: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """``(tensors, metadata)`` of any ``.safetensors`` file, on the CPU, its size bounded."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise UserError(f"model file not found: {path}")
    check_file_size(path, "model file")
    metadata = _header(path).get("__metadata__") or {}
    if not isinstance(metadata, dict):
        raise UserError(f"{path} is not a safetensors file (its __metadata__ is a "
                        f"{type(metadata).__name__}, not a mapping of texts)")
    try:
        tensors = load_file(path, device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise UserError(f"cannot read {path}: {str(exc).splitlines()[0]} (is it a complete "
                        f".safetensors file?)") from None
    return tensors, {str(k): str(v) for k, v in metadata.items()}


def read_model_file(path: str | Path) -> dict[str, Any]:
    """A model file as a checkpoint-shaped dict: ``model`` (weights), ``config`` (a plain dict,
    to be checked with :func:`sodkit.config.loader.stored_config`), ``provenance``."""
    tensors, metadata = read_safetensors(path)
    if metadata.get(_META_FORMAT) != FORMAT or _META_CONFIG not in metadata:
        raise UserError(f"{path} is a .safetensors file but not a sodkit model file (no "
                        f"{FORMAT!r} metadata); a weights file in sodkit's names can start a "
                        f"run with model.init_from")
    config = _json_object(path, metadata[_META_CONFIG], _META_CONFIG)
    provenance = _json_object(path, metadata.get(_META_PROVENANCE, "{}"), _META_PROVENANCE)
    return {"model": tensors, "config": config, "provenance": provenance,
            "model_file": True}


def _json_object(path: str | Path, text: str, key: str) -> dict[str, Any]:
    """The JSON object a metadata entry holds; anything else (not JSON, a list, a text) is one
    line naming the file: the metadata is input, like the rest of the file."""
    try:
        value = json.loads(text)
    except ValueError:
        raise UserError(f"{path}: its {key} metadata is not JSON (the file is damaged)") from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: its {key} metadata is a JSON {_json_type(value)}, not an "
                        f"object (the file is damaged or was not written by sodkit)")
    return value


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def read_model_metadata(path: str | Path) -> tuple[Any, Any]:
    """``(config, provenance)`` as stored in a model file, read from its header alone (the
    weights are not read): for uses of the config only, such as a fine-tuning recipe."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"model file not found: {path}")
    check_file_size(path, "model file")
    metadata = _header(path).get("__metadata__") or {}
    if not isinstance(metadata, dict) or metadata.get(_META_FORMAT) != FORMAT \
            or _META_CONFIG not in metadata:
        raise UserError(f"{path} is a .safetensors file but not a sodkit model file (no "
                        f"{FORMAT!r} metadata)")
    return (_json_object(path, metadata[_META_CONFIG], _META_CONFIG),
            _json_object(path, metadata.get(_META_PROVENANCE, "{}"), _META_PROVENANCE))
