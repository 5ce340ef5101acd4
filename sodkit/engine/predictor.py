"""Masks for new images at each image's own resolution, whatever their size or mode."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from ..errors import UserError
from ..imageio import IMAGE_EXTENSIONS, encode_mask, read_image
from ..outputs import OutputFolder
from ..paths import inside
from ..sharding import shard_range
from ..text import plural
from .evaluator import MaskWriter, agree_on_round
from .overlap import OutputThread
from .postprocess import Postprocess, postprocess_of, predict_scores
from .runtime import Runtime, eval_mode
from .skip_bad import SkipUnreadable, collate_skipping, next_batch, report_skipped

if TYPE_CHECKING:
    from ..cutout import Rendering

logger = logging.getLogger(__name__)


def collect_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Image files named directly or found in named folders (not recursive), stems unique."""
    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_dir():
            found = sorted(p for p in item.iterdir()
                           if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            if not found:
                raise UserError(f"no images ({', '.join(IMAGE_EXTENSIONS)}) in folder {item}")
            files.extend(found)
        elif item.is_file():
            files.append(item)
        else:
            raise UserError(f"input not found: {item}")
    by_stem: dict[str, Path] = {}
    for path in files:
        if path.stem in by_stem and by_stem[path.stem] != path:
            raise UserError(f"two inputs would write {path.stem}.png: {by_stem[path.stem]} and "
                            f"{path}; predict them into different --out folders")
        by_stem[path.stem] = path
    return list(by_stem.values())


class _ImageFiles(Dataset):
    def __init__(self, paths: list[Path], transform: Callable[[np.ndarray], torch.Tensor],
                 keep_image: bool = False) -> None:
        self.paths, self.transform, self.keep_image = paths, transform, keep_image

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict:
        image = read_image(self.paths[index])
        return {"image": self.transform(image), "size": image.shape[:2], "index": index,
                "original": image if self.keep_image else None}


def _collate(items: list[dict]) -> dict:
    return {
        "image": torch.stack([it["image"] for it in items]),
        "size": [it["size"] for it in items],
        "index": [it["index"] for it in items],
        "original": [it.get("original") for it in items],
    }


def predict_arrays(
    model: nn.Module,
    images: Sequence[np.ndarray],
    transform: Callable[[np.ndarray], torch.Tensor],
    runtime: Runtime,
    batch_size: int = 8,
    tta: Sequence[str] = (),
    precision: str = "fp32",
) -> Iterator[np.ndarray]:
    """Probability maps (float32 (H, W) in [0, 1], each at its image's own size) of uint8 RGB
    arrays, in order: the Python API's path, with :func:`predict_files`' transform, forward
    and resize (whose PNGs are these maps quantised), the transform's pipeline included
    (``data.preprocess``: :mod:`sodkit.engine.postprocess`)."""
    post = postprocess_of(transform)
    with eval_mode(model):
        for start in range(0, len(images), batch_size):
            chunk = images[start : start + batch_size]
            batch = torch.stack([transform(image) for image in chunk]).to(runtime.device)
            probs = predict_scores(model, batch, runtime, post, precision, tta=tta)
            for i, image in enumerate(chunk):
                prob = post.probability_map(probs[i : i + 1], tuple(image.shape[:2]))
                yield prob.float().cpu().numpy()


def _encoded(batch: dict | None, probs: torch.Tensor | None, targets: list[Path],
             post: Postprocess, rendering: Rendering | None) -> list[tuple[Path, bytes]]:
    """One batch's files: each image's scores at its own size, as ``rendering`` (None: the
    uint8 mask) PNG bytes (run beside the next forward pass: :mod:`sodkit.engine.overlap`)."""
    if batch is None or probs is None:
        return []
    files = []
    for i, (size, target) in enumerate(zip(batch["size"], targets, strict=True)):
        scores = probs[i : i + 1]
        files.append((target, encode_mask(post.to_mask(scores, tuple(size)))
                      if rendering is None else rendering.png(
                          post.probability_map(scores, tuple(size)).cpu().numpy(),
                          batch["original"][i])))
    return files


class ImageBatches:
    """:func:`predict_files`' batches of this rank's shard of ``paths``, decoded by
    ``num_workers`` processes from the moment it is made (their first batches are prefetched):
    ``sodkit predict`` makes it before it reads the weights and builds the network, so that the
    workers decode meanwhile. :meth:`close` stops the workers (``predict_files`` does at its
    end)."""

    def __init__(self, paths: list[Path], transform: Callable[[np.ndarray], torch.Tensor],
                 runtime: Runtime, batch_size: int = 8, num_workers: int = 0,
                 keep_images: bool = False, skip_bad: bool = False) -> None:
        self.paths, self.batch_size, self.skip_bad = paths, batch_size, skip_bad
        self.mine = [paths[i] for i in shard_range(len(paths), runtime.rank, runtime.world_size)]
        dataset, collate = _ImageFiles(self.mine, transform, keep_images), _collate
        if skip_bad:
            dataset, collate = SkipUnreadable(dataset), collate_skipping(collate)
        loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                            collate_fn=collate)
        self.iterator: Iterator[dict] | None = iter(loader)
        self.skipped: list[tuple[int, str]] = []  # (index into mine, why): --skip-bad

    def next(self) -> dict | None:
        """The next batch, None at the end (:func:`~sodkit.engine.skip_bad.next_batch`)."""
        if self.iterator is None:
            return None
        return next_batch(self.iterator, self.skipped if self.skip_bad else None)

    def close(self) -> None:
        self.iterator = None  # its worker processes end with it


def predict_files(
    model: nn.Module,
    paths: list[Path],
    transform: Callable[[np.ndarray], torch.Tensor],
    runtime: Runtime,
    out_dir: Path | OutputFolder,
    batch_size: int = 8,
    num_workers: int = 0,
    tta: Sequence[str] = (),
    rendering: Rendering | None = None,
    skip_bad: bool = False,
    images: ImageBatches | None = None,
) -> list[Path]:
    """Write ``out_dir/<stem>.png`` for every input; returns this rank's predicted files.

    ``rendering`` (``--save``): what each PNG holds (:mod:`sodkit.cutout`); None: the mask.

    Under torchrun each rank predicts its own contiguous shard of ``paths``; rank 0 writes.
    ``out_dir``: the folder, or the output folder the command claimed (its rules apply).
    ``skip_bad``: an image that cannot be read is left out and listed, not an error.
    ``images``: the batches, already decoding (:class:`ImageBatches` of the same ``paths``,
    ``batch_size`` and ``skip_bad``); None: made here from ``transform`` and ``num_workers``.
    """
    outputs = out_dir if isinstance(out_dir, OutputFolder) else OutputFolder.at(out_dir)
    out_dir = outputs.root if isinstance(out_dir, OutputFolder) else Path(out_dir)
    if images is None:
        images = ImageBatches(paths, transform, runtime, batch_size, num_workers,
                              rendering is not None and rendering.needs_image, skip_bad)
    elif (images.paths, images.batch_size, images.skip_bad) != (paths, batch_size, skip_bad):
        raise ValueError("predict_files: images made for other paths, batch size or skip_bad")
    mine = images.mine
    writer = MaskWriter(runtime, len(paths), batch_size, outputs)
    post = postprocess_of(transform)  # the output side of the transform's pipeline
    written: list[Path] = []
    try:
        with eval_mode(model), OutputThread(writer, runtime) as output:
            for _ in range(writer.rounds):  # every rank the same rounds (see MaskWriter)
                batch = images.next()
                probs = None if batch is None else predict_scores(
                    model, runtime.on_device(batch["image"]), runtime, post,
                    tta=tta)
                agree_on_round(runtime, probs, [mine[i].name for i in batch["index"]] if batch
                               else [])
                targets = [] if batch is None else [inside(out_dir, f"{mine[i].stem}.png")
                                                    for i in batch["index"]]
                written += targets
                output.put(lambda b=batch, p=probs, t=targets: _encoded(b, p, t, post,
                                                                        rendering))
    finally:
        images.close()
    left_out = report_skipped(runtime, [(mine[i], why) for i, why in images.skipped]
                              ) if skip_bad else 0
    logger.info("wrote %s to %s", plural(len(paths) - left_out, "mask"), out_dir)
    return written
