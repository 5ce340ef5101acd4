"""Typed configuration: YAML recipes, dotted overrides, validation, resolved dumps."""

from .loader import ConfigError, from_dict, load_config, parse_override, save_config, to_dict
from .schema import (
    Config,
    DataCfg,
    DatasetCfg,
    EvalCfg,
    LossCfg,
    ModelCfg,
    OptimCfg,
    RuntimeCfg,
    ScheduleCfg,
    TrainCfg,
)

__all__ = [
    "Config", "ConfigError", "DataCfg", "DatasetCfg", "EvalCfg", "LossCfg", "ModelCfg",
    "OptimCfg", "RuntimeCfg", "ScheduleCfg", "TrainCfg", "from_dict", "load_config",
    "parse_override", "save_config", "to_dict",
]
