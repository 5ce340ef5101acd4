"""The config a file carries (a model file's metadata, a checkpoint's ``config``): input, not trust.

A recipe is what the user wrote; a config stored in a file is what someone else wrote, and a
model file is meant to be passed around. So a stored config gets every check a recipe gets
(:func:`sodkit.config.loader.stored_config`), and before that, :func:`untrusted_config` takes out
every key that names a file or a host, which sodkit would otherwise open or fetch on the file's
word: ``model.backbone_kwargs.checkpoint_path: /home/you/private.pt`` made timm read that file
(and echo its tensor names) from ``predict``, ``export --model`` and ``sodkit.load``.

Taken out (the user names them, on the command line or in a recipe, where they are needed):

- the schema's file keys: ``output_root``, ``data_root``, ``data.train`` and ``data.test``
  (dataset roots, folders, list files), ``model.pretrained`` (a weights file, or ``timm``: a hub
  download), ``model.init_from``;
- in the free-form dicts (``model.backbone_kwargs``, the parameters in ``loss.terms``), at any
  depth: every entry whose key speaks of a file or a host (``checkpoint_path``,
  ``pretrained_cfg_overlay``, ``cache_dir``, ``hf_hub_id``, ``url``, ...) and every entry whose
  value holds a path-like text (a ``/`` or ``\\``, ``://``, a leading ``~``, a weights-file
  extension).

The schema's own keys are typed, and each is checked by the loader (``data.preprocess`` is one
of the known pipelines, ``model.backbone`` a name in timm's registry, names are names). Light
imports only (no torch).
"""

from __future__ import annotations

import copy
import logging
import re
from pathlib import Path
from typing import Any

from ..errors import ConfigError

logger = logging.getLogger(__name__)

# schema keys that name files or hosts: none is taken from a file
FILE_KEYS = (("output_root",), ("data_root",), ("data", "train"), ("data", "test"),
             ("model", "pretrained"), ("model", "init_from"))
# free-form dicts whose entries go to other code as keyword arguments, and how many levels of
# dicts are entered (``loss.terms``: a term's own parameters) before a dict is judged whole
FREE_FORM = {("model", "backbone_kwargs"): 0, ("loss", "terms"): 1}
_FILE_WORDS = re.compile(r"path|file|dir|folder|root|url|uri|host|hub|repo|cache|checkpoint|"
                         r"pretrained|download|init_from|weights", re.IGNORECASE)
_WEIGHT_SUFFIXES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npz", ".h5", ".onnx",
                    ".pkl", ".tar", ".zip", ".json", ".yaml", ".yml")


def looks_like_path(value: Any) -> bool:
    """Whether a text could name a file or a host: a separator, ``://``, a leading ``~`` or
    ``.``, or a file extension of weights or configs."""
    if not isinstance(value, str):
        return False
    text = value.strip().lower()
    return ("/" in text or "\\" in text or text.startswith(("~", ".")) or
            text.endswith(_WEIGHT_SUFFIXES))


def _holds_path(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_FILE_WORDS.search(str(k)) or _holds_path(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_holds_path(v) for v in value)
    return looks_like_path(value)


def _clean_free_form(node: dict[str, Any], key: str, dropped: list[str], depth: int) -> None:
    """Remove, in place, the entries of a free-form dict that name a file or a host: by their
    key or anywhere in their value (a dict within is entered ``depth`` levels deep, else taken
    out whole). A number names nothing (``drop_path_rate: 0.1`` stays); ``pretrained: true``
    is a download."""
    for name in list(node):
        value, where = node[name], f"{key}.{name}"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            continue
        if isinstance(value, dict) and depth > 0 and not _FILE_WORDS.search(str(name)):
            _clean_free_form(value, where, dropped, depth - 1)
        elif _FILE_WORDS.search(str(name)) or _holds_path(value):
            del node[name]
            dropped.append(where)


def untrusted_config(raw: Any, source: str | Path) -> tuple[dict[str, Any], list[str]]:
    """``(config, dropped)``: a copy of the config stored in ``source`` without any key that
    names a file or a host (module docstring), and the dotted keys taken out. The result is a
    plain dict for :func:`sodkit.config.loader.stored_config` (or a fine-tuning recipe: the
    user's overrides go on top, then the loader's checks).

    Raises:
        ConfigError: the stored config is not a mapping of sections (a list, a text, ...),
            naming ``source``.
    """
    if not isinstance(raw, dict):
        what = "none (no config)" if raw is None else f"a {type(raw).__name__}"
        raise ConfigError(f"{source}: the config stored in it is invalid: expected a mapping of "
                          f"sections, got {what} (the file is damaged or was not written by "
                          f"sodkit)")
    config = copy.deepcopy(raw)
    dropped: list[str] = []
    for path in FILE_KEYS:
        parent = _section(config, path[:-1], source)
        if parent is not None and parent.get(path[-1]) not in (None, "", []):
            dropped.append(".".join(path))
        if parent is not None:
            parent.pop(path[-1], None)
    for path, depth in FREE_FORM.items():
        parent = _section(config, path[:-1], source)
        node = parent.get(path[-1]) if parent is not None else None
        if isinstance(node, dict):
            _clean_free_form(node, ".".join(path), dropped, depth)
    return config, dropped


def _section(config: dict[str, Any], path: tuple[str, ...], source: str | Path
             ) -> dict[str, Any] | None:
    node: Any = config
    for i, name in enumerate(path):
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: the config stored in it is invalid: "
                              f"{'.'.join(path[:i + 1])}: expected a mapping, got "
                              f"{type(node).__name__} {node!r:.80}")
    return node


# keys every training run's config holds (its data, its output folder, its backbone's weights):
# taken out without a word; anything else taken out is said in one line
ROUTINE = {".".join(path) for path in FILE_KEYS}


def report_dropped(dropped: list[str], source: str | Path) -> None:
    """One log line for what was taken out that a run's config does not hold routinely."""
    unusual = [key for key in dropped if key not in ROUTINE]
    if unusual:
        logger.warning("%s: its stored config names files or hosts, which sodkit never opens "
                       "on a file's word; ignored: %s", source, ", ".join(unusual))
    elif dropped:
        logger.debug("%s: stored keys not used from a file: %s", source, ", ".join(dropped))


def stored_preprocess(raw: Any, source: str | Path) -> str | None:
    """``data.preprocess`` of the config stored in ``source`` alone (``sodkit test`` follows the
    checkpoint's inference pipeline under the recipe's config), checked as the loader checks it:
    a stored ``'../../evil'`` is one line naming the file."""
    import typing

    from .schema import Preprocess

    data = raw.get("data") if isinstance(raw, dict) else None
    value = data.get("preprocess") if isinstance(data, dict) else None
    known = typing.get_args(Preprocess)
    if value is not None and value not in known:
        raise ConfigError(f"{source}: the config stored in it is invalid: data.preprocess: "
                          f"{value!r:.80} is not one of {list(known)}")
    return value


def shareable_config(raw: dict[str, Any], source: str | Path) -> dict[str, Any]:
    """The config a file carries, to be written into another file (``export --model``): the
    run's record kept (its data, output folder, weights source: every reader takes those out),
    and the free-form entries that name a file or host dropped, so that a hostile key is not
    passed on to a reader that would not take it out."""
    clean, _ = untrusted_config(raw, source)
    for path in FILE_KEYS:  # the record of the training, as it was
        parent: Any = raw
        for name in path[:-1]:
            parent = parent.get(name) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent:
            target = clean
            for name in path[:-1]:
                target = target.setdefault(name, {})
            target[path[-1]] = copy.deepcopy(parent[path[-1]])
    return clean
