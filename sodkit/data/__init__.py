"""Data: folder datasets paired by stem, presets, the synthetic demo, transforms and loaders.

The members that need no torch (pairing, checks, presets, the demo) are imported here, so that
the dataset presets are registered whatever the import order (the founding design's
conventions; docs/DESIGN.md). The torch Datasets, transforms and loaders are imported when one
of their names is first used (PEP 562): ``sodkit check-data`` imports this package and not
torch, and starts in a fraction of a second instead of the 2-3 s torch takes to import.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..imageio import IMAGE_EXTENSIONS, list_images, read_image, read_mask, write_mask
from . import checks, pairs, presets, render, synthetic
from .checks import Issue, check_pair, check_pairs
from .pairs import Pair, find_pairs, prepare_dataset, read_list_file, resolve_dataset
from .presets import PRESETS, Preset, cache_dir, demo_root, get_preset
from .synthetic import DEMO_VERSION, generate_demo

# the names of the members that import torch -> their module
_WITH_TORCH = {
    "TestDataset": "datasets", "TrainDataset": "datasets",
    "InferenceSampler": "loaders", "MultiScaleBatchSampler": "loaders",
    "build_test_loaders": "loaders", "build_train_dataset": "loaders",
    "build_train_loader": "loaders", "collate_test": "loaders", "collate_train": "loaders",
    "set_epoch": "loaders", "shard_range": "loaders",
    "SoftMask": "transforms", "TrainTransform": "transforms",
    "build_train_transform": "transforms",
}
_TORCH_MODULES = ("augment", "datasets", "loaders", "transforms")


def __getattr__(name: str) -> Any:
    if name in _TORCH_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _WITH_TORCH:
        value = getattr(importlib.import_module(f"{__name__}.{_WITH_TORCH[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEMO_VERSION", "IMAGE_EXTENSIONS", "PRESETS", "InferenceSampler", "Issue",
    "MultiScaleBatchSampler", "Pair", "Preset", "SoftMask", "TestDataset", "TrainDataset",
    "TrainTransform", "build_test_loaders", "build_train_dataset", "build_train_loader",
    "build_train_transform", "cache_dir", "check_pair", "check_pairs", "checks", "collate_test",
    "collate_train", "datasets", "demo_root", "find_pairs", "generate_demo", "get_preset",
    "list_images", "loaders", "pairs", "prepare_dataset", "presets", "read_image",
    "read_list_file", "read_mask", "render", "resolve_dataset", "set_epoch", "shard_range",
    "synthetic", "transforms", "write_mask",
]
