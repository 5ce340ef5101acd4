"""Masks for new images at each image's own resolution, whatever their size or mode."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from ..data.loaders import shard_range
from ..errors import UserError
from ..imageio import IMAGE_EXTENSIONS, encode_mask, read_image
from ..outputs import OutputFolder
from ..paths import inside
from ..text import plural
from .evaluator import MaskWriter, agree_on_round
from .postprocess import postprocess_of, predict_scores
from .runtime import Runtime, eval_mode
from .skip_bad import SkipUnreadable, collate_skipping, next_batch, report_skipped

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
    def __init__(self, paths: list[Path], transform: Callable[[np.ndarray], torch.Tensor]) -> None:
        self.paths, self.transform = paths, transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict:
        image = read_image(self.paths[index])
        return {"image": self.transform(image), "size": image.shape[:2], "index": index}


def _collate(items: list[dict]) -> dict:
    return {
        "image": torch.stack([it["image"] for it in items]),
        "size": [it["size"] for it in items],
        "index": [it["index"] for it in items],
    }


def predict_files(
    model: nn.Module,
    paths: list[Path],
    transform: Callable[[np.ndarray], torch.Tensor],
    runtime: Runtime,
    out_dir: Path | OutputFolder,
    batch_size: int = 8,
    num_workers: int = 0,
    tta: Sequence[str] = (),
    skip_bad: bool = False,
) -> list[Path]:
    """Write ``out_dir/<stem>.png`` for every input; returns this rank's predicted files.

    Under torchrun each rank predicts its own contiguous shard of ``paths``; rank 0 writes.
    ``out_dir``: the folder, or the output folder the command claimed (its rules apply).
    ``skip_bad``: an image that cannot be read is left out and listed, not an error.
    """
    outputs = out_dir if isinstance(out_dir, OutputFolder) else OutputFolder.at(out_dir)
    out_dir = outputs.root if isinstance(out_dir, OutputFolder) else Path(out_dir)
    mine = [paths[i] for i in shard_range(len(paths), runtime.rank, runtime.world_size)]
    dataset, collate = _ImageFiles(mine, transform), _collate
    if skip_bad:
        dataset, collate = SkipUnreadable(dataset), collate_skipping(collate)
    skipped: list[tuple[int, str]] = []
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers,
                        collate_fn=collate)
    writer = MaskWriter(runtime, len(paths), batch_size, outputs)
    post = postprocess_of(transform)  # the output side of the transform's pipeline
    written = []
    batches = iter(loader)
    with eval_mode(model):
        for _ in range(writer.rounds):  # every rank the same rounds (see MaskWriter)
            batch = next_batch(batches, skipped if skip_bad else None)
            probs = None if batch is None else predict_scores(
                model, batch["image"].to(runtime.device), runtime, post, tta=tta)
            agree_on_round(runtime, probs, [mine[i].name for i in batch["index"]] if batch
                           else [])
            if batch is None:
                writer.send([])
                continue
            files = []
            for i, (size, index) in enumerate(zip(batch["size"], batch["index"], strict=True)):
                target = inside(out_dir, f"{mine[index].stem}.png")
                files.append((target, encode_mask(post.to_mask(probs[i : i + 1], tuple(size)))))
                written.append(target)
            writer.send(files)
    left_out = report_skipped(runtime, [(mine[i], why) for i, why in skipped]) if skip_bad else 0
    logger.info("wrote %s to %s", plural(len(paths) - left_out, "mask"), out_dir)
    return written
