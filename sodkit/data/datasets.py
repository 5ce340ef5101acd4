"""torch Datasets over folder pairs (:mod:`sodkit.data.pairs`): training samples drawn at the
multi-scale sampler's size and seed, test samples at the network's input size with the GT mask
at its own. Ranks and devices stay out of here: sharding is the loaders' job.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from ..errors import DataError
from ..imageio import read_image, read_image_reduced, read_mask, read_matte
from .pairs import Pair

logger = logging.getLogger(__name__)


def _read_pair(pair: Pair, at_least: tuple[int, int] | None = None, matte: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
    """The pair's image and mask, equal in size (``matte``: a 16-bit alpha matte keeps its 16
    bits, as training targets; :func:`~sodkit.imageio.read_matte`). With ``at_least`` (H, W) a
    JPEG image is
    decoded at reduced scale where it stays that large (:func:`~sodkit.imageio.read_image_reduced`),
    and its mask, decoded full, is averaged down to it (``INTER_AREA``): the training resize
    that follows then starts from what a full decode would give, less some rounding."""
    image, factor = (read_image(pair.image), 1) if at_least is None else \
        read_image_reduced(pair.image, at_least)
    mask = read_matte(pair.mask) if matte else read_mask(pair.mask)
    if factor > 1:
        if image.shape[:2] == tuple(-(-side // factor) for side in mask.shape):
            return image, cv2.resize(mask, (image.shape[1], image.shape[0]),
                                     interpolation=cv2.INTER_AREA)
        image = read_image(pair.image)  # sizes differ: the message gives the full ones
    if image.shape[:2] != mask.shape:
        raise DataError(f"{pair.image} is {image.shape[0]}x{image.shape[1]} but its mask "
                        f"{pair.mask} is {mask.shape[0]}x{mask.shape[1]} (run sodkit check-data)")
    return image, mask


class TrainDataset(Dataset):
    """Training pairs; an item key is ``(index, size, seed)`` from the multi-scale sampler.

    The sample's augmentation draws from torch's CPU generator seeded with ``seed`` (its state
    is restored afterwards), so it is reproducible whatever the worker count or resume point. A
    plain ``int`` key means ``(index, default_size, index)``.

    A pair that fails to decode (a file damaged after the start-of-run check) is replaced by the
    next good pair, with a warning naming the file: the same replacement whatever the worker,
    since a bad file always fails. More than ``max_bad`` such pairs stop the run.
    """

    def __init__(self, pairs: list[Pair], transform: Callable, default_size: int,
                 name: str = "train", max_bad: int = 0) -> None:
        self.pairs = pairs
        self.transform = transform
        self.default_size = default_size
        self.name = name
        self.max_bad = max_bad
        self._bad: set[int] = set()  # pairs this process found broken
        self.held_out: list[Pair] = []  # data.val_fraction's pairs, not trained on

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, key: int | tuple[int, int, int]) -> dict[str, torch.Tensor | int]:
        index, size, seed = (key, self.default_size, key) if isinstance(key, int) else key
        index, (image, mask) = self._read_good(index, self._at_least(size))
        with torch.random.fork_rng(devices=[]):
            # the CPU generator only, the one fork_rng restores: torch.manual_seed would also
            # seed every CUDA generator (in a process that trains on a GPU with
            # data.num_workers=0, per sample), and before CUDA is initialised it queues the
            # call with a copy of the stack (0.1-0.6 ms a sample, growing with its depth)
            torch.default_generator.manual_seed(seed)
            image_t, mask_t = self.transform(image, mask, size)
        return {"image": image_t, "mask": mask_t, "index": index}

    def _at_least(self, size: int | tuple[int, int]) -> tuple[int, int]:
        """The decoded size that still gives ``size`` (an int side or (H, W)) its pixels after
        the transform's random crop (which keeps at least ``1 - crop`` of each side)."""
        height, width = (size, size) if isinstance(size, int) else size
        keep = 1.0 - float(getattr(self.transform, "crop", 0.0) or 0.0)
        return math.ceil(height / keep), math.ceil(width / keep)

    def _read_good(self, index: int, at_least: tuple[int, int] | None = None
                   ) -> tuple[int, tuple[np.ndarray, np.ndarray]]:
        for offset in range(len(self.pairs)):
            candidate = (index + offset) % len(self.pairs)
            if candidate in self._bad:
                continue
            try:
                return candidate, _read_pair(self.pairs[candidate], at_least, matte=True)
            except DataError as exc:
                self._bad.add(candidate)
                if len(self._bad) > self.max_bad:
                    raise DataError(f"{exc} ({len(self._bad)} training pairs failed to load, "
                                    f"more than data.max_bad_samples allows)") from None
                logger.warning("%s; training goes on with another pair in its place", exc)
        raise DataError(f"training set {self.name!r}: no pair can be read")


class TestDataset(Dataset):
    """Test pairs: the image at the network's input size, the GT mask at its own resolution;
    ``trimaps``: each stem's trimap file (``trimap_dir``), for the matting metrics."""

    def __init__(self, pairs: list[Pair], transform: Callable, name: str,
                 trimaps: dict[str, Path] | None = None) -> None:
        self.pairs = pairs
        self.transform = transform
        self.name = name
        self.trimaps = trimaps

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def names(self) -> list[str]:
        return [p.stem for p in self.pairs]

    def __getitem__(self, index: int) -> dict[str, object]:
        image, mask = _read_pair(self.pairs[index])
        return {"image": self.transform(image), "gt": mask, "name": self.pairs[index].stem,
                "index": index, "image_size": (image.shape[0], image.shape[1])}
