"""YAML + ``key=value`` overrides -> a validated :class:`Config`, and back to YAML.

Every error is a :class:`ConfigError` naming the dotted key and, for typos, the closest valid
key, so a user learns about a mistake before any data is read or a model is built.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from ..errors import ConfigError
from .derived import fit_backbone_size, fit_birefnet_batchnorm
from .ranges import check_ranges, expand_paths
from .rules import check_values
from .schema import Config
from .yamlio import load_yaml, read_yaml


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read a YAML recipe (or start from defaults) and apply dotted ``key=value`` overrides."""
    raw: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        raw = read_yaml(path, ConfigError) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
    for item in overrides or []:
        _apply_override(raw, item)
    return _validated(raw)


def config_from_dict(raw: dict[str, Any], overrides: list[str] | None = None) -> Config:
    """A recipe built in code (e.g. from a model file), ``key=value`` overrides applied and
    checked as a YAML recipe is."""
    for item in overrides or []:
        _apply_override(raw, item)
    return _validated(raw)


def _validated(raw: Any) -> Config:
    cfg = from_dict(Config, raw, prefix="")
    check_values(cfg)
    return fit_birefnet_batchnorm(fit_backbone_size(cfg, ConfigError))


def stored_config(raw: Any, source: str | Path, overrides: Sequence[str] = ()) -> Config:
    """The config a checkpoint or model file holds, as input rather than trust: every key that
    names a file or a host taken out (:func:`sodkit.config.stored.untrusted_config`, said in
    one line), the user's ``overrides`` applied on top, then checked as a recipe is (a
    ``data.size=60000`` would ask for 10.8 GB per image). Errors name ``source``."""
    from .stored import report_dropped, untrusted_config

    config, dropped = untrusted_config(raw, source)
    report_dropped(dropped, source)
    for item in overrides:  # the user's own words: trusted as a recipe's
        _apply_override(config, item)
    try:
        return _validated(config)
    except ConfigError as exc:
        raise ConfigError(f"{source}: the config stored in it is invalid: {exc}") from None


def parse_override(item: str) -> tuple[list[str], Any]:
    """Split ``a.b.c=value``; the value is parsed as YAML (``2``, ``[256, 320]``, ``null``)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value, e.g. train.epochs=2")
    key, text = item.split("=", 1)
    keys = [k for k in key.strip().split(".")]
    if not all(keys):
        raise ConfigError(f"override {item!r}: empty part in key {key!r}")
    value = load_yaml(text, f"override {item!r}: value", ConfigError) if text.strip() else ""
    return keys, value


def _apply_override(raw: dict[str, Any], item: str) -> None:
    keys, value = parse_override(item)
    node: Any = raw
    for depth, key in enumerate(keys[:-1]):
        if isinstance(node, list) or key.isdigit():
            node = node[_list_index(node, key, keys[: depth + 1])]
            continue
        child = node.get(key)
        if not isinstance(child, (dict, list)):
            child = node[key] = {}
        node = child
    last = keys[-1]
    if isinstance(node, list) or last.isdigit():
        node[_list_index(node, last, keys)] = value
    else:
        node[last] = value


def _list_index(node: Any, key: str, keys: list[str]) -> int:
    size = len(node) if isinstance(node, list) else 0
    if not key.isdigit() or int(key) >= size:
        raise ConfigError(f"override key {'.'.join(keys)}: {key!r} is not an index of a list "
                          f"of {size} entries (set the whole list instead, e.g. key=[...])")
    return int(key)


def from_dict(cls: type, raw: Any, prefix: str) -> Any:
    """Build dataclass ``cls`` from a mapping, checking every key, value type and range."""
    where = prefix.rstrip(".") or "the config"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in raw:
        if key not in fields:
            raise ConfigError(unknown_key_message(prefix + str(key), list(fields), prefix))
    kwargs = {key: _convert(hints[key], value, prefix + key) for key, value in raw.items()}
    built = cls(**kwargs)
    check_ranges(built, prefix, ConfigError)  # every numeric key: finite and in its range
    expand_paths(built)  # output_root=~/runs: the home folder, not ./~/runs
    return built


def unknown_key_message(key: str, valid: list[str], prefix: str = "") -> str:
    name = key[len(prefix):]
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.5)
    hint = f"; did you mean {prefix}{close[0]}?" if close else ""
    return f"unknown config key {key!r}{hint} (valid keys here: {', '.join(valid)})"


def unknown_value_message(key: str, value: str, valid: Sequence[str]) -> str:
    by_lower = {str(v).lower(): str(v) for v in reversed(valid)}  # the first of equal ones
    close = difflib.get_close_matches(str(value).lower(), list(by_lower), n=1)  # hce: HCE
    hint = f"; did you mean {by_lower[close[0]]!r}?" if close else ""
    return f"{key}: {value!r} is not one of {list(valid)}{hint}"


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        for option in inner[:-1]:  # e.g. list[int] | Literal["auto"]: the first that fits
            try:
                return _convert(option, value, key)
            except ConfigError:
                pass
        return _convert(inner[-1], value, key)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key + ".")
    if origin is Literal:
        if isinstance(value, bool) and ("off" if value is False else "on") in args:
            value = "off" if value is False else "on"  # YAML 1.1 reads a bare off / on as bool
        if value not in args:
            raise ConfigError(unknown_value_message(key, value, args))
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_convert(args[0], v, f"{key}.{i}") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return {str(k): _convert(args[1], v, f"{key}.{k}") for k, v in value.items()}
    return _convert_scalar(tp, value, key)


def _convert_scalar(tp: Any, value: Any, key: str) -> Any:
    if tp is Any:
        return value
    if value is None:
        raise ConfigError(f"{key}: must be a {tp.__name__}, got null")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML reads "1e-3" (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    raise ConfigError(f"{key}: expected {tp.__name__}, got {type(value).__name__} {value!r}")


def to_dict(cfg: Any) -> Any:
    return dataclasses.asdict(cfg)


def save_config(cfg: Config, path: str | Path) -> None:
    """Write the resolved config; ``load_config`` of the file gives back an equal Config."""
    from ..atomic import write_atomic

    write_atomic(path, yaml.safe_dump(to_dict(cfg), sort_keys=False))
