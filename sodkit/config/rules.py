"""The config's rules across keys, checked when a config is loaded, before any work: each
key's own type and range are the schema's (:mod:`sodkit.config.ranges`); these relate keys to
one another (a warm-up longer than the run, a loss phase naming no term). Names that a registry
resolves (networks, losses, presets, metric families) are the registries' to check. Config
imports no builder: the builders call these rules on configs made in code, too."""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..errors import ConfigError
from ..output_names import check_dataset_name
from ..paths import check_name
from .schema import SIZE_MULTIPLE, Config, DataCfg, LossPhaseCfg


def check_values(cfg: Config) -> None:
    """Rules across keys (each key's own range is checked by ``from_dict``: schema ``ranged``);
    registry names (networks, losses, presets, families) are checked by their registries."""
    if cfg.schedule.warmup_epochs > cfg.train.epochs:
        raise ConfigError(f"schedule.warmup_epochs: {cfg.schedule.warmup_epochs} is longer than "
                          f"the run (train.epochs {cfg.train.epochs}): the LR would never reach "
                          f"optim.lr")
    if cfg.optim.name == "sgd" and cfg.optim.nesterov and cfg.optim.momentum == 0:
        raise ConfigError("optim.nesterov: needs optim.momentum > 0")
    for i, size in enumerate(cfg.data.size_list):
        if isinstance(size, list) and len(size) != 2:
            raise ConfigError(f"data.size_list.{i}: a size is a side or [height, width], got "
                              f"{size}")
    check_size_range(cfg.data)
    for i, phase in enumerate(cfg.loss.schedule):  # against loss.terms, before any work
        check_phase(phase, f"loss.schedule.{i}", cfg.loss.terms)
    check_name(cfg.name, "name", "my_run", ConfigError)
    for split in ("train", "test"):
        for i, dataset in enumerate(getattr(cfg.data, split)):
            if dataset.name:  # a derived name (preset, root folder) is checked when resolved
                check_dataset_name(dataset.name, f"data.{split}.{i}.name", "ECSSD", ConfigError)


def check_size_range(cfg: DataCfg) -> None:
    """Two [low, high] pairs (height, width), low <= high, low >= 32 (so that the floor to a
    multiple of 32 stays a size), and not beside ``data.size_list``."""
    value = cfg.size_range
    if not value:
        return
    if len(value) != 2 or any(not isinstance(p, list) or len(p) != 2 for p in value):
        raise ConfigError(f"data.size_range: [[min height, max height], [min width, max "
                          f"width]], got {value}")
    for i, (low, high) in enumerate(value):
        if low > high or low < SIZE_MULTIPLE:
            raise ConfigError(f"data.size_range.{i}: [low, high] with {SIZE_MULTIPLE} <= low "
                              f"<= high, got {[low, high]}")
    if cfg.size_list:
        raise ConfigError("data.size_range: set it or data.size_list, not both")


def check_phase(phase: LossPhaseCfg, key: str, terms: Iterable[str]) -> None:
    """A ``loss.schedule`` entry against ``loss.terms``'s names: each name one of them, each
    weight or factor a finite number >= 0, something to do, and a first epoch that is one."""
    names = list(terms)
    for part in ("terms", "scale"):
        for name, value in getattr(phase, part).items():
            where = f"{key}.{part}.{name}"
            if name not in names:
                raise ConfigError(f"{where}: {name!r} is not a term of loss.terms (terms: "
                                  f"{', '.join(names) or 'none'}); add it there (weight 0 "
                                  f"until then)")
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{where}: {value!r} must be a finite number >= 0")
    if not phase.terms and not phase.scale:
        raise ConfigError(f"{key}: give terms (weights) or scale (factors), or remove it")
    if phase.from_epoch == 0:
        raise ConfigError(f"{key}.from_epoch: 0 is not an epoch (epochs count from 1; -N: the "
                          f"last N epochs)")
