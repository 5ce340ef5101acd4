"""DataLoaders: multi-scale, rank-sharded training batches and exact inference sharding.

Training: :class:`MultiScaleBatchSampler` shuffles with (seed, epoch) like ``DistributedSampler``,
gives every rank the same number of full batches (``drop_last``), and draws one input side per
batch from ``data.size_list`` with a generator that does not depend on the rank, so all ranks use
the same side at the same step (no rank waits on a bigger batch; SyncBatchNorm sees one size).
It yields ``(index, size, seed)`` keys, and the dataset resizes each sample straight to ``size``.

Testing: :class:`InferenceSampler` splits a test set into contiguous, possibly uneven shards, so
every image is evaluated exactly once over all ranks; no duplicates pad the last shard (the cause
of the seed repo's distributed/single-GPU mismatch).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from ..config.schema import Config
from ..errors import ConfigError, DataError
from ..inference.pipelines import build_test_transform
from ..resources import cap_workers, resolve_workers
from ..sharding import shard_range
from ..text import plural
from .checks import Issue, bad_stems, check_pairs, output_name_issues
from .datasets import TestDataset, TrainDataset
from .holdout import NAME as VAL
from .holdout import split_pairs
from .pairs import Pair, find_pairs, resolve_dataset
from .sizes import Size, SizeRange, batch_size_choices
from .transforms import build_train_transform

logger = logging.getLogger(__name__)

_SHOWN_ISSUES = 20  # problems named one by one in the log before a summary line


def _mix(*values: int) -> int:
    """A well-spread 63-bit seed from small integers (seed, epoch, position, ...)."""
    entropy = [v % 2**64 for v in values]  # SeedSequence wants non-negative integers
    return int(np.random.SeedSequence(entropy).generate_state(1, np.uint64)[0] >> np.uint64(1))


class MultiScaleBatchSampler(Sampler[list[tuple[int, int, int]]]):
    """Batches of ``(index, size, seed)`` for one rank; call :meth:`set_epoch` every epoch.

    Args:
        length: samples in the (concatenated) training set.
        batch_size: samples per batch on this rank.
        sizes: input sizes to draw from, one per batch: a side (square) or (height, width); a
            single value disables multi-scale; or a :class:`~sodkit.data.sizes.SizeRange`.
        seed: the run's seed; shuffling, sizes and augmentation seeds derive from it and the epoch.
        rank, world_size: this process's shard.
        shuffle: random order (True for training).
    """

    def __init__(self, length: int, batch_size: int, sizes: list[Size] | SizeRange,
                 seed: int = 0, rank: int = 0, world_size: int = 1, shuffle: bool = True
                 ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.length, self.batch_size = length, batch_size
        self.sizes = sizes if isinstance(sizes, SizeRange) else list(sizes)
        self.seed, self.rank, self.world_size, self.shuffle = seed, rank, world_size, shuffle
        self.epoch = self.start = 0
        self.num_batches = length // (batch_size * world_size)  # drop_last: equal on all ranks

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """The epoch to draw, and the batch to start at (a run resumed in mid-epoch skips the
        batches it trained on: the order is a function of seed and epoch, so skipping is free)."""
        self.epoch, self.start = epoch, start

    def __len__(self) -> int:
        return self.num_batches

    def batch_sizes(self) -> list[Size]:
        """The input size of each batch of this epoch (identical on every rank)."""
        if not isinstance(self.sizes, SizeRange) and len(self.sizes) == 1:
            return self.sizes * self.num_batches
        rng = np.random.default_rng(_mix(self.seed, self.epoch, 1))
        if isinstance(self.sizes, SizeRange):
            return self.sizes.draw(rng, self.num_batches)
        return [self.sizes[i] for i in rng.integers(0, len(self.sizes), self.num_batches)]

    def __iter__(self) -> Iterator[list[tuple[int, int, int]]]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.length, generator=g).tolist()
        else:
            order = list(range(self.length))
        used = self.num_batches * self.batch_size * self.world_size
        mine = order[:used][self.rank::self.world_size]
        for b, size in enumerate(self.batch_sizes()):
            if b < self.start:
                continue
            start = b * self.batch_size
            batch = mine[start:start + self.batch_size]
            yield [(i, size, _mix(self.seed, self.epoch, i)) for i in batch]


class InferenceSampler(Sampler[int]):
    """Indices of one rank's contiguous shard; all ranks together see every index exactly once."""

    def __init__(self, length: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, {world_size})")
        self.indices = shard_range(length, rank, world_size)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def set_epoch(loader: DataLoader, epoch: int, start: int = 0) -> None:
    """Tell a training loader which epoch starts (new order, sizes and augmentation seeds) and
    at which batch of it (``start`` > 0 when resuming in mid-epoch)."""
    sampler = loader.batch_sampler
    if isinstance(sampler, MultiScaleBatchSampler):
        sampler.set_epoch(epoch, start)


def _seed_worker(worker_id: int) -> None:
    """numpy's generator per worker (torch and ``random`` are seeded by the DataLoader itself)."""
    np.random.seed(torch.initial_seed() % 2**32)


def collate_train(items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return {"image": torch.stack([it["image"] for it in items]),
            "mask": torch.stack([it["mask"] for it in items]),
            "index": torch.tensor([it["index"] for it in items], dtype=torch.int64)}


def collate_test(items: list[dict[str, Any]]) -> dict[str, Any]:
    """Images stacked; GT masks (original sizes differ), names and sizes kept as lists."""
    return {"image": torch.stack([it["image"] for it in items]),
            "gt": [it["gt"] for it in items],
            "name": [it["name"] for it in items],
            "index": torch.tensor([it["index"] for it in items], dtype=torch.int64),
            "image_size": [it["image_size"] for it in items]}


def _loader_options(cfg: Config, persistent: bool) -> dict[str, Any]:
    workers = cap_workers(resolve_workers(cfg.data.num_workers), what="data.num_workers")
    return {"num_workers": workers,
            "pin_memory": cfg.data.pin_memory and torch.cuda.is_available(),
            "persistent_workers": persistent and workers > 0,
            "prefetch_factor": cfg.data.prefetch_factor if workers > 0 else None,
            "worker_init_fn": _seed_worker if workers > 0 else None,
            "generator": torch.Generator().manual_seed(cfg.runtime.seed)}


def _check_threads() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def _drop_bad_pairs(pairs: list[Pair], name: str, budget: int) -> list[Pair]:
    """The pairs whose headers check out; each bad file is named in a warning."""
    issues = _log_encodings(check_pairs(pairs, full=False, threads=_check_threads()),
                            f"train set {name}")
    bad = bad_stems(issues)
    for issue in issues[:_SHOWN_ISSUES]:
        logger.warning("train set %s: skipping %s: %s", name, issue.stem, issue.problem)
    if len(issues) > _SHOWN_ISSUES:
        logger.warning("train set %s: %d more problems (run sodkit check-data for the list)",
                       name, len(issues) - _SHOWN_ISSUES)
    if len(bad) > budget:
        raise DataError(f"train set {name}: {len(bad)} bad pairs, more than data.max_bad_samples="
                        f"{budget} (first: {issues[0].problem}); run sodkit check-data CONFIG "
                        f"for the list, fix or remove them, or raise data.max_bad_samples")
    return [pair for pair in pairs if pair.stem not in bad]


def build_train_dataset(cfg: Config) -> TrainDataset:
    """All ``data.train`` datasets, concatenated in config order, bad pairs left out."""
    if not cfg.data.train:
        raise DataError("no training data: add at least one dataset to data.train "
                        "(e.g. {preset: demo-train})")
    pairs, names, targets = [], [], []
    budget = cfg.data.max_bad_samples
    for i, dataset in enumerate(cfg.data.train):
        resolved = resolve_dataset(dataset, cfg.data_root, where=f"data.train.{i}")
        found = find_pairs(resolved)
        good = _drop_bad_pairs(found, resolved.name, budget)
        budget -= len(found) - len(good)
        logger.info("train set %s: %s in %s", resolved.name, plural(len(good), "pair"),
                    resolved.root)
        targets.append(_targets(resolved.name, good, cfg.data.binarize))
        pairs.extend(good)
        names.append(resolved.name)
    if not pairs:
        raise DataError("no readable training pairs (run sodkit check-data CONFIG)")
    pairs, held = split_pairs(pairs, cfg.data.val_fraction)
    if held:
        logger.info("test set %s: %d of the %d training pairs held out (data.val_fraction=%g, "
                    "by a hash of each stem)", VAL, len(held), len(pairs) + len(held),
                    cfg.data.val_fraction)
    dataset = TrainDataset(pairs, build_train_transform(cfg.data), cfg.data.size,
                           "+".join(names), max_bad=budget)
    dataset.held_out = held  # the test set `val`: build_test_loaders(..., val=...)
    dataset.targets = [line for line in targets if line]  # the trainer logs them
    return dataset


def _targets(name: str, pairs: list[Pair], binarize: float | None) -> str:
    """A line saying whether a training set's masks are binary or soft, and what the losses
    see (for the run's log); a warning when alpha mattes are binarised."""
    from .softness import sample_softness

    if not pairs:
        return ""
    found = sample_softness([pair.mask for pair in pairs])
    trained = ("trained as they are (soft targets; data.binarize is null)" if binarize is None
               else f"binarised at data.binarize={binarize:g} (targets 0 or 1)")
    if found.soft and binarize is not None:
        logger.warning("train set %s holds alpha mattes, but data.binarize=%g makes their soft "
                       "edges 0 or 1: the network will learn hard edges (data.binarize=null "
                       "keeps them)", name, binarize)
    return f"train set {name} masks: {found.describe()}; {trained}"


def _log_encodings(issues: list[Issue], label: str) -> list[Issue]:
    """Say once per folder which masks are read in another encoding than grey (0/1 label maps,
    16-bit, colour, palette: ``sodkit.mask_encoding``); returns the pairs' own issues."""
    for issue in issues:
        if not issue.stem:  # a folder's note, not a pair's problem
            logger.warning("%s: %s: %s", label, issue.path, issue.problem)
    return [issue for issue in issues if issue.stem]


def check_test_shard(test_set: TestDataset, shard: range) -> None:
    """Decode this rank's test pairs before any prediction: a test set must be whole."""
    pairs = [test_set.pairs[i] for i in shard]
    issues = check_pairs(pairs, full=True, threads=_check_threads())
    issues = output_name_issues(pairs) + _log_encodings(issues, f"test set {test_set.name}")
    errors = [issue for issue in issues if issue.severity == "error"]
    if errors:
        shown = "; ".join(f"{issue.path}: {issue.problem}" for issue in errors[:3])
        more = f" and {len(errors) - 3} more" if len(errors) > 3 else ""
        raise DataError(f"test set {test_set.name}: {plural(len(errors), 'bad pair')} "
                        f"({shown}{more}); a test set must be whole to be comparable: fix or "
                        f"remove them (sodkit check-data CONFIG lists them all)")
    warnings = [issue for issue in issues if issue.severity != "error"]
    if warnings:
        logger.warning("test set %s: %s empty or full (e.g. %s: %s)", test_set.name,
                       plural(len(warnings), "mask"), warnings[0].path.name, warnings[0].problem)


def build_train_loader(cfg: Config, rank: int = 0, world_size: int = 1) -> DataLoader:
    """The training loader of one rank; batches are ``{"image", "mask", "index"}``.

    ``image``: float32 (B, 3, h, w) normalised; ``mask``: float32 (B, 1, h, w) in [0, 1];
    ``index``: int64 (B,) into the concatenated set. ``h, w`` is one value of ``data.size_list``
    per batch (a side: square; or [height, width]), or drawn from ``data.size_range``
    (BiRefNet's ``dynamic_size``), or ``data.size``. Call :func:`set_epoch` at the start of
    every epoch.
    """
    dataset = build_train_dataset(cfg)
    sizes = batch_size_choices(cfg.data)
    sampler = MultiScaleBatchSampler(len(dataset), cfg.data.batch_size, sizes,
                                     seed=cfg.runtime.seed, rank=rank, world_size=world_size)
    if len(sampler) == 0:
        raise DataError(f"the training set has {plural(len(dataset), 'pair')}, fewer than one "
                        f"global batch (data.batch_size {cfg.data.batch_size} x "
                        f"{plural(world_size, 'process')})")
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_train,
                      **_loader_options(cfg, cfg.data.persistent_workers))


def build_test_loaders(cfg: Config, rank: int = 0, world_size: int = 1,
                       val: list[Pair] | None = None) -> dict[str, DataLoader]:
    """One loader per ``data.test`` dataset (by name), each over this rank's contiguous shard.

    Batches: ``image`` float32 (B, 3, S, S) at ``data.size``; ``gt`` list of uint8 (H, W) masks
    at their original size; ``name`` list of stems; ``index`` int64 (B,) dataset indices;
    ``image_size`` list of the images' original (H, W). ``loader.dataset`` is the
    :class:`TestDataset` (``.pairs``, ``.names``, ``.name``, full length on every rank).
    """
    transform = build_test_transform(cfg.data)
    loaders: dict[str, DataLoader] = {}
    for i, dataset in enumerate(cfg.data.test):
        resolved = resolve_dataset(dataset, cfg.data_root, where=f"data.test.{i}")
        if resolved.name in loaders or (val and resolved.name == VAL):
            why = "data.val_fraction's held-out set" if resolved.name == VAL and val else \
                "another test set"
            raise ConfigError(f"data.test.{i}.name: {resolved.name!r} is the name of {why}; "
                              "give this test set a different name")
        pairs = find_pairs(resolved)
        trimaps = None
        if resolved.trimap_dir:
            from ..trimap import match_trimaps

            trimaps = match_trimaps(Path(resolved.root) / resolved.trimap_dir,
                                    [pair.stem for pair in pairs], f"data.test.{i}.trimap_dir")
        test_set = TestDataset(pairs, transform, resolved.name, trimaps)
        logger.info("test set %s: %s in %s", resolved.name, plural(len(test_set), "pair"),
                    resolved.root)
        loaders[resolved.name] = _test_loader(test_set, cfg, rank, world_size)
    if val:
        loaders[VAL] = _test_loader(TestDataset(val, transform, VAL), cfg, rank, world_size)
    return loaders


def _test_loader(test_set: TestDataset, cfg: Config, rank: int, world_size: int) -> DataLoader:
    sampler = InferenceSampler(len(test_set), rank, world_size)
    check_test_shard(test_set, sampler.indices)
    return DataLoader(test_set, batch_size=cfg.data.test_batch_size, sampler=sampler,
                      collate_fn=collate_test, **_loader_options(cfg, persistent=False))
