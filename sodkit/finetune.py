"""A model file (or checkpoint) is its own fine-tuning recipe: ``sodkit train MODEL.safetensors
[key=value ...]``.

What makes the model that model comes from the config stored in the file: the architecture
(``model``, with ``init_from`` set to the file and no backbone download), its preprocessing
and augmentation (``data`` but the dataset lists), ``loss``, ``optim``, ``schedule``,
``train``, ``eval.tta`` and ``runtime.precision``: for an imported release, the published
recipe its authors trained it with. What belongs to the user's run comes from
``configs/finetune_custom.yaml``: the datasets (``<data_root>/images`` + ``masks``, a tenth held
out as ``val``), the evaluation (every epoch, the starting model first, ``best.pt`` by ``val``),
and every section or key the stored config lacks. The user's ``key=value`` overrides go on top.
The run is named ``finetune_<file stem>``.

The file is the user's (trusted as a path); the config inside it is not: it is read once, in
:func:`stored_recipe`, and checked as a recipe before any of it is used, and none of its keys
that name files, folders or hosts (dataset roots, ``data_root``, ``output_root``,
``init_from``, ``pretrained``, and such entries of ``model.backbone_kwargs`` and the loss
terms' parameters: :func:`sodkit.config.stored.untrusted_config`) is taken.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .config.loader import ConfigError, config_from_dict, stored_config
from .config.schema import Config
from .config.stored import untrusted_config
from .errors import UserError

logger = logging.getLogger(__name__)

WEIGHTS_SUFFIXES = (".safetensors", ".pt", ".pth")
BASE = "finetune_custom.yaml"  # under the source checkout's configs/
FROM_FILE = ("model", "data", "loss", "optim", "schedule", "train")
# data keys of the user's run and machine, never the source's
DATA_OF_THE_RUN = ("train", "test", "val_fraction", "num_workers", "pin_memory",
                   "persistent_workers", "prefetch_factor", "max_bad_samples")


def is_weights_file(path: str | Path) -> bool:
    """A checkpoint or model file given where a recipe goes (told apart by its suffix)."""
    return Path(path).suffix.lower() in WEIGHTS_SUFFIXES


def stored_recipe(path: Path) -> dict[str, Any]:
    """The config stored in ``path``, checked as a recipe (an invalid one is an error naming
    the file): the one place a fine-tuning recipe reads it."""
    from .model_file import is_model_file, read_model_metadata

    if is_model_file(path):
        raw = read_model_metadata(path)[0]
    else:
        from .torchfile import load_checkpoint

        raw = load_checkpoint(path, mmap=True).get("config")
    stored_config(raw, path)  # checked as a recipe; what it names is said in one line
    clean, _ = untrusted_config(raw, path)  # no key that names a file or host goes on
    return clean


def _base() -> dict[str, Any]:
    from .config.yamlio import read_yaml
    from .published.formats import RECIPES

    path = RECIPES / BASE
    if not path.is_file():
        raise UserError(f"{path} not found: a model file's fine-tuning recipe starts from "
                        f"configs/{BASE} of sodkit's source; run from a clone, or write a "
                        f"recipe with model.init_from=FILE")
    raw = read_yaml(path, ConfigError)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return raw


def finetune_raw(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """The fine-tuning recipe of ``path`` as a plain dict, overrides not yet applied."""
    path = Path(path).expanduser()
    stored = stored_recipe(path)
    raw = _base()
    for section in FROM_FILE:
        value = stored.get(section)
        if not isinstance(value, dict):
            continue  # none stored: finetune_custom.yaml's
        if section == "data":
            raw.setdefault("data", {}).update(
                {k: v for k, v in value.items() if k not in DATA_OF_THE_RUN})
        else:
            raw[section] = value
    kept = raw.get("model", {})
    raw["model"] = {**(stored.get("model") if isinstance(stored.get("model"), dict) else kept),
                    "init_from": str(path.absolute()), "pretrained": None,
                    "init_weights": kept.get("init_weights", "ema"), "init_exclude": []}
    for section, key in (("eval", "tta"), ("runtime", "precision")):
        value = stored.get(section)
        if isinstance(value, dict) and key in value:
            raw.setdefault(section, {})[key] = value[key]
    raw["name"] = f"finetune_{path.stem}"
    for key in ("data_root", "output_root"):
        raw.pop(key, None)  # the user's (default, or an override), never the file's
    return raw


def finetune_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """The config ``sodkit train FILE [key=value ...]`` runs (and ``sodkit info FILE`` shows)."""
    raw = finetune_raw(path, overrides)
    cfg = config_from_dict(raw, overrides)
    logger.info("recipe: %s's own (model, data preprocessing, loss, optim, schedule, train) on "
                "configs/%s (datasets, evaluation); model.init_from=%s", path, BASE,
                cfg.model.init_from)
    return cfg
