"""Typed configuration: YAML recipes, dotted overrides, validation, resolved dumps."""

from ..errors import ConfigError
from .loader import from_dict, load_config, parse_override, save_config, to_dict
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
