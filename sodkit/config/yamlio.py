"""YAML read as data, and bounded: every YAML file and ``key=value`` override sodkit reads.

PyYAML's safe loader builds plain data only (a ``!!python/...`` tag is an error, never a call),
but it lets a document of a few hundred bytes describe a billion values: each alias (``*a``)
repeats a whole anchored node (``&a [...]``), and ten levels of ten aliases make 10**9 strings
once anything copies them (the config's conversion, an error message that shows a value; 762
bytes cost ``sodkit info`` 3.7 GB). This loader counts the nodes a document has once every alias
is expanded, and refuses a document beyond :data:`MAX_NODES` (a recipe has a few hundred), one
whose aliases refer to themselves, and a file larger than :data:`MAX_BYTES` (a recipe has a few
KB), before anything is built from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..errors import UserError

MAX_BYTES = 1 << 20
MAX_NODES = 100_000


class _BoundedLoader(yaml.SafeLoader):
    """The safe loader, refusing documents that expand beyond :data:`MAX_NODES` nodes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._composed = getattr(self, "_composed", 0) + 1  # nodes written out, aliases aside
        if self._composed > MAX_NODES:
            raise _TooLarge(f"more than {MAX_NODES} values")
        return super().compose_node(parent, index)

    def compose_document(self) -> Any:
        node = super().compose_document()
        expanded = _expanded_size(node, {}, set())
        if expanded > MAX_NODES:
            raise _TooLarge(f"its aliases (*name) expand it to {expanded} values, more than "
                            f"{MAX_NODES}")
        return node


class _TooLarge(Exception):
    """A document beyond the bounds (the caller names the file)."""


def _expanded_size(node: Any, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes of ``node`` with every alias expanded (each shared node counted once per use)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise _TooLarge("an alias (*name) refers to the node that holds it (a loop)")
    open_nodes.add(key)
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, sizes, open_nodes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, sizes, open_nodes) + _expanded_size(v, sizes, open_nodes)
                       for k, v in node.value)
    else:
        size = 1
    open_nodes.discard(key)
    sizes[key] = size
    return size


def load_yaml(text: str, source: str, error: type[UserError] = UserError) -> Any:
    """The data of one YAML document, bounded; ``error`` (naming ``source``) when it is not
    valid YAML or exceeds the bounds."""
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass
    except _TooLarge as exc:
        raise error(f"{source}: refused: {exc} (a damaged or crafted file?)") from None
    except RecursionError:
        raise error(f"{source}: refused: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise error(f"{source}: not valid YAML: {exc}") from None


def read_yaml(path: str | Path, error: type[UserError] = UserError) -> Any:
    """A YAML file's data, its size checked before reading; ``error`` names the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise error(f"{path}: refused: {size / 2**20:.1f} MiB, more than the "
                        f"{MAX_BYTES // 2**20} MiB a YAML file may have")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {path}: {exc}") from None
    return load_yaml(text, str(path), error)
