"""Which prediction file belongs to which GT in ``sodkit eval``: methods, prefixes, suffixes.

Published prediction folders often name files ``<stem>_sal.png`` or ``<method>_<stem>.png``.
A method is a folder plus an optional prefix and suffix around the GT stem, set for all
methods (``--pred-prefix`` / ``--pred-suffix``), per method (``--pred NAME=DIR:SUFFIX`` or
``NAME=DIR:PREFIX{stem}SUFFIX``) or per method and dataset in a methods file (YAML or JSON)::

    methods:
      - {name: MINet, folder: preds/MINet, suffix: _sal}
      - name: F3Net
        folder: preds/F3Net
        datasets: {ECSSD: {folder: preds/f3net_ecssd, prefix: f3_}}

Parsing stays unambiguous: ``DIR:SUFFIX`` is split at its last colon only when the part after
it holds no path separator and the whole text is not itself a folder; when both readings name
existing folders it is an error. Two files that both match one GT stem are an error naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError, UserError

STEM = "{stem}"
_METHOD_KEYS = {"name", "folder", "prefix", "suffix", "datasets"}
_DATASET_KEYS = {"folder", "prefix", "suffix"}


@dataclass
class Naming:
    """Where one method's predictions of one dataset are and how their names wrap the stem."""

    folder: Path
    prefix: str = ""
    suffix: str = ""


@dataclass
class Method:
    name: str
    naming: Naming
    datasets: dict[str, Naming] = field(default_factory=dict)  # per-dataset overrides
    only_listed: bool = False  # PySODEvalToolkit's file: a dataset it does not name is skipped

    def for_dataset(self, dataset: str | None) -> Naming | None:
        """The naming for ``dataset`` (None: a single unnamed GT folder); None when the
        method's file names datasets one by one and not this one."""
        if dataset in self.datasets:
            return self.datasets[dataset]
        if self.only_listed:
            return None
        folder = self.naming.folder / dataset if dataset else self.naming.folder
        return Naming(folder, self.naming.prefix, self.naming.suffix)


def split_pattern(text: str, what: str) -> tuple[Path, str | None]:
    """``DIR`` or ``DIR:PATTERN`` -> (folder, pattern or None), read unambiguously."""
    head, sep, tail = text.rpartition(":")
    if not sep or not head or "/" in tail or "\\" in tail:
        return Path(text), None
    if Path(text).is_dir():
        if Path(head).is_dir():
            raise UserError(f"{what} {text!r} is ambiguous: both {text} and {head} are folders; "
                            f"name the method in a --methods file instead")
        return Path(text), None
    return Path(head), tail


def wrap(pattern: str | None, prefix: str, suffix: str) -> tuple[str, str]:
    """(prefix, suffix) from a pattern (``SUFFIX`` or ``PREFIX{stem}SUFFIX``), else defaults."""
    if pattern is None:
        return prefix, suffix
    if STEM in pattern:
        before, after = pattern.split(STEM, 1)
        return before, after
    return prefix, pattern


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise UserError(f"{where}.{key}: expected text, got {value!r}")
    return value


def _naming(entry: dict[str, Any], base: Path, where: str, default: Naming | None) -> Naming:
    from .toolkit import affix

    folder = _text(entry, "folder", where) or (str(default.folder) if default else "")
    if not folder:
        raise UserError(f"{where}: 'folder' is missing")
    return Naming(base / folder,
                  affix(_text(entry, "prefix", where), f"{where}.prefix") if "prefix" in entry
                  else (default.prefix if default else ""),
                  affix(_text(entry, "suffix", where), f"{where}.suffix") if "suffix" in entry
                  else (default.suffix if default else ""))


def _check_keys(entry: Any, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: expected a mapping with keys {', '.join(sorted(allowed))}")
    unknown = set(entry) - allowed
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: "
                        f"{', '.join(sorted(allowed))}")
    return entry


def read_methods_file(path: Path) -> list[Method]:
    """Methods of a YAML / JSON file (read with YAML's safe loader: data, never code)."""
    from ..config.yamlio import read_yaml
    from ..paths import check_name
    from .toolkit import is_toolkit_methods

    data = read_yaml(path)  # bounded in size and in what its aliases expand to
    if is_toolkit_methods(data):
        return toolkit_methods(data, path)
    entries = data.get("methods") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise UserError(f"--methods {path}: expected a list of methods (or 'methods: [...]')")
    methods = []
    for i, entry in enumerate(entries):
        where = f"--methods {path}: methods[{i}]"
        entry = _check_keys(entry, _METHOD_KEYS, where)
        name = check_name(entry.get("name"), f"{where}.name", "MINet")
        naming = _naming(entry, path.parent, where, None)
        overrides = {}
        for dataset, sub in (entry.get("datasets") or {}).items():
            sub_where = f"{where}.datasets.{dataset}"
            overrides[str(dataset)] = _naming(_check_keys(sub, _DATASET_KEYS, sub_where),
                                              path.parent, sub_where, naming)
        methods.append(Method(name, naming, overrides))
    return methods


def toolkit_methods(data: dict[str, Any], path: Path) -> list[Method]:
    """The methods of PySODEvalToolkit's method JSON (see :mod:`.toolkit`'s docstring)."""
    from ..paths import check_name
    from .toolkit import entry

    methods = []
    for name, datasets in data.items():
        where = f"--methods {path}: {name}"
        checked = check_name(name, f"--methods {path}: a method's name", "MINet")
        overrides = {}
        for dataset, value in datasets.items():
            if not isinstance(dataset, str) or not dataset.isprintable():
                raise UserError(f"{where}: {dataset!r} is not a dataset's name")
            overrides[dataset] = Naming(*entry(value, path.parent, f"{where}.{dataset}"))
        methods.append(Method(checked, Naming(path.parent), overrides, only_listed=True))
    return methods


def match_files(naming: Naming, stems: set[str], method: str) -> tuple[dict[str, Path], list[str]]:
    """``{GT stem: prediction file}`` of a folder and the names of files that match no GT.

    A file matches stem ``s`` when its name without extension is ``prefix + s + suffix`` (a
    suffix may end with an extension, e.g. ``_sal.png``, to take only those files).
    """
    from ..imageio import IMAGE_EXTENSIONS
    from .toolkit import strip_extension

    folder = naming.folder
    if not folder.is_dir():
        raise DataError(f"method {method!r}: folder not found: {folder}")
    suffix, extension = strip_extension(naming.suffix)
    prefix = naming.prefix
    found: dict[str, Path] = {}
    extra: list[str] = []
    for path in sorted(folder.iterdir()):
        kind = path.suffix.lower()
        if kind not in IMAGE_EXTENSIONS or not path.is_file() or extension not in (None, kind):
            continue
        name = path.stem
        core = name[len(prefix): len(name) - len(suffix)]
        if (not name.startswith(prefix) or not name.endswith(suffix)
                or len(name) < len(prefix) + len(suffix) or core not in stems):
            extra.append(path.name)
            continue
        if core in found:
            raise DataError(f"method {method!r}: {found[core]} and {path} both match the GT "
                            f"{core!r}; keep one, or tell them apart with --pred-suffix / "
                            f"--pred-prefix (e.g. a suffix ending in .png)")
        found[core] = path
    return found, extra
