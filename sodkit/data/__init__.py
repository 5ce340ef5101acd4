"""Data: folder datasets paired by stem, presets, the synthetic demo, transforms and loaders.

Every member module is imported here so that the dataset presets are registered whatever the
import order (the founding design's conventions; docs/DESIGN.md).
"""

from ..imageio import IMAGE_EXTENSIONS, list_images, read_image, read_mask, write_mask
from . import checks, datasets, loaders, presets, render, synthetic, transforms
from .checks import Issue, check_pair, check_pairs
from .datasets import (
    Pair,
    TestDataset,
    TrainDataset,
    find_pairs,
    prepare_dataset,
    read_list_file,
    resolve_dataset,
)
from .loaders import (
    InferenceSampler,
    MultiScaleBatchSampler,
    build_test_loaders,
    build_train_dataset,
    build_train_loader,
    collate_test,
    collate_train,
    set_epoch,
    shard_range,
)
from .presets import PRESETS, Preset, cache_dir, demo_root, get_preset
from .synthetic import DEMO_VERSION, generate_demo
from .transforms import SoftMask, TrainTransform, build_train_transform

__all__ = [
    "DEMO_VERSION", "IMAGE_EXTENSIONS", "PRESETS", "InferenceSampler", "Issue",
    "MultiScaleBatchSampler", "Pair", "Preset", "SoftMask", "TestDataset", "TrainDataset",
    "TrainTransform", "build_test_loaders", "build_train_dataset", "build_train_loader",
    "build_train_transform", "cache_dir", "check_pair", "check_pairs", "checks", "collate_test",
    "collate_train", "datasets", "demo_root", "find_pairs", "generate_demo", "get_preset",
    "list_images", "loaders", "prepare_dataset", "presets", "read_image", "read_list_file",
    "read_mask", "render", "resolve_dataset", "set_epoch", "shard_range", "synthetic",
    "transforms", "write_mask",
]
