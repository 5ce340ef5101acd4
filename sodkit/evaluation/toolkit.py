"""PySODEvalToolkit's JSON files, read as they are (#33): a toolkit user runs the same evaluation
with ``sodkit eval --datasets rgb_sod.json --methods rgb_sod_methods.json --out DIR``.

The toolkit (``utils/generate_info.py``, ``metrics/image_metrics.py``) describes

* datasets: ``{"ECSSD": {"mask": {"path", "prefix", "suffix"}, "image": {...},
  "index_file": "test.lst"}}``: the GT files are ``<prefix><name><suffix>`` in ``mask.path``
  (the suffix carries the extension: ``.png``), the RGB images likewise in ``image.path``, and
  an optional index file lists the names to evaluate;
* methods: ``{"MINet": {"ECSSD": {"path", "prefix", "suffix"}}}``: a method's predictions of a
  dataset are ``<prefix><name><suffix>`` in ``path``; a dataset the method does not name is
  skipped for it (the toolkit says "does not have results").

The dataset file becomes ``--gt NAME=DIR`` (with its prefix and suffix), ``--images NAME=DIR``
(read only when a family needs the images, CCM: ``--compute all`` then includes it) and ``--list
NAME=FILE``; the method file becomes methods with a naming per dataset
(``methods.toolkit_methods``). Both are input from anywhere: read with YAML's safe loader within
its size bound, every name checked as a dataset or method name, prefixes and suffixes as parts
of a file name (no path separator, no control character), and relative paths taken relative to
the JSON file's folder (the toolkit takes them relative to where it runs; absolute paths, the
usual, work as they are). One difference stays: where predictions are missing the toolkit
evaluates the names both sides have, silently; sodkit names the missing ones and needs
``--allow-missing`` for that.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError, UserError

if TYPE_CHECKING:
    from .request import EvalRequest

_ENTRY_KEYS = {"path", "prefix", "suffix"}
_DATASET_KEYS = {"mask", "image", "index_file"}


def _shown(key: Any) -> str:
    """A key read from a file, as text that cannot steer a terminal."""
    return str(key) if str(key).isprintable() else repr(key)


def is_toolkit_methods(data: Any) -> bool:
    """Whether a methods file is PySODEvalToolkit's: ``{method: {dataset: {"path": ...}}}``."""
    return (isinstance(data, dict) and bool(data) and "methods" not in data
            and all(isinstance(v, dict) and v and all(isinstance(e, dict) and "path" in e
                                                       for e in v.values())
                    for v in data.values()))


def affix(value: Any, where: str) -> str:
    """A prefix or suffix: text that can only be part of a file name."""
    from ..paths import name_problem

    if value is None or value == "":
        return ""
    problem = name_problem(value) if isinstance(value, str) else "it is not text"
    if problem is not None:
        raise UserError(f"{where}: {value!r} cannot be part of a file name ({problem})")
    return value


def entry(value: Any, base: Path, where: str) -> tuple[Path, str, str]:
    """``{"path", "prefix", "suffix"}`` -> (folder relative to ``base``, prefix, suffix)."""
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected {{\"path\": ..., \"prefix\": ..., \"suffix\": ...}}")
    unknown = sorted(_shown(k) for k in set(value) - _ENTRY_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: path, prefix, "
                        f"suffix")
    path = value.get("path")
    if not isinstance(path, str) or not path or not path.isprintable():
        raise UserError(f"{where}.path: expected the folder's path as text")
    return (base / Path(path).expanduser(), affix(value.get("prefix"), f"{where}.prefix"),
            affix(value.get("suffix"), f"{where}.suffix"))


def add_datasets_file(request: EvalRequest) -> None:
    """``--datasets FILE`` as ``--gt`` / ``--images`` / ``--list`` options of each dataset it
    names (``request.gt_namings`` / ``request.image_namings``: the prefix and suffix of each)."""
    request.gt_namings, request.image_namings = {}, {}
    if request.datasets_file:
        _expand(request, Path(request.datasets_file))
    if not request.gt:
        raise UserError("name the GT masks: --gt [NAME=]DIR, or --datasets FILE (a "
                        "PySODEvalToolkit dataset JSON)")


def _expand(request: EvalRequest, path: Path) -> None:
    from ..config.yamlio import read_yaml
    from ..output_names import check_dataset_name

    data = read_yaml(path)  # JSON is YAML: bounded in size and in what aliases expand to
    if not isinstance(data, dict) or not data:
        raise UserError(f"--datasets {path}: expected PySODEvalToolkit's dataset JSON, "
                        f"{{\"NAME\": {{\"mask\": {{\"path\": ..., \"suffix\": \".png\"}}}}}}")
    for name, value in data.items():
        where = f"--datasets {path}: {name}"
        name = check_dataset_name(name, f"--datasets {path}: a dataset's name")
        if "=" in name or not isinstance(value, dict) or "mask" not in value:
            raise UserError(f"{where}: expected a name without '=' and {{\"mask\": "
                            f"{{\"path\": ..., \"suffix\": ...}}, \"image\": ...}}")
        unknown = sorted(_shown(k) for k in set(value) - _DATASET_KEYS)
        if unknown:
            raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                            f"{', '.join(sorted(_DATASET_KEYS))}")
        folder, *naming = entry(value["mask"], path.parent, f"{where}.mask")
        request.gt.append(f"{name}={folder}")
        request.gt_namings[name] = tuple(naming)
        if "image" in value:
            folder, *naming = entry(value["image"], path.parent, f"{where}.image")
            request.images.append(f"{name}={folder}")
            request.image_namings[name] = tuple(naming)
        if value.get("index_file"):
            index = value["index_file"]
            if not isinstance(index, str) or not index.isprintable():
                raise UserError(f"{where}.index_file: expected a file's path as text")
            request.stem_list.append(f"{name}={path.parent / Path(index).expanduser()}")


def strip_extension(suffix: str) -> tuple[str, str | None]:
    """A suffix without the image extension it may end with (the toolkit's ``.png``), and that
    extension (None: it names none)."""
    from ..imageio import IMAGE_EXTENSIONS

    for extension in IMAGE_EXTENSIONS:
        if suffix.lower().endswith(extension):
            return suffix[: -len(extension)], extension
    return suffix, None


def list_named(folder: Path, prefix: str, suffix: str) -> dict[str, Path]:
    """``{name: file}`` of the image files of ``folder`` named ``<prefix><name><suffix>``
    (a suffix may end with the extension, as the toolkit's do); two files of one name are an
    error naming both."""
    from ..imageio import IMAGE_EXTENSIONS, list_images
    if not prefix and not suffix:
        return list_images(folder)
    if not folder.is_dir():
        raise DataError(f"folder not found: {folder}")
    core, extension = strip_extension(suffix)
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        kind, stem = path.suffix.lower(), path.stem
        if (kind not in IMAGE_EXTENSIONS or extension not in (None, kind) or not path.is_file()
                or not stem.startswith(prefix) or not stem.endswith(core)
                or len(stem) <= len(prefix) + len(core)):
            continue
        name = stem[len(prefix): len(stem) - len(core)]
        if name in found:
            raise DataError(f"{found[name]} and {path} are both named {prefix}{name}{suffix}; "
                            f"keep one")
        found[name] = path
    return found


def named_stem(stem: str, naming: tuple[str, str] | None) -> str:
    """A listed stem as the dataset names it: ``gt_0001`` -> ``0001`` for prefix ``gt_`` (the
    toolkit's index files list whole file names)."""
    if not naming:
        return stem
    prefix, core = naming[0], strip_extension(naming[1])[0]
    if stem.startswith(prefix) and stem.endswith(core) and len(stem) > len(prefix) + len(core):
        return stem[len(prefix): len(stem) - len(core)]
    return stem
