"""Masks for new images at each image's own resolution, whatever their size or mode."""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from ..imageio import read_image, read_image_alpha
from ..inference.encode import Outputs, encode_outputs
from ..inference.forward import eval_mode, predict_scores
from ..inference.pipelines import postprocess_of
from ..inference.postprocess import Postprocess
from ..inference.render import NOUNS
from ..outputs import OutputFolder
from ..paths import inside
from ..predict_plan import collect_inputs  # noqa: F401 - its home before
from ..progress import Progress
from ..sharding import shard_range
from ..text import and_list, plural
from .overlap import OutputThread
from .rounds import MaskWriter, agree_on_round
from .runtime import Runtime
from .skip_bad import SkipUnreadable, collate_skipping, next_batch, report_skipped

if TYPE_CHECKING:
    from ..inference.render import Rendering

logger = logging.getLogger(__name__)


class _ImageFiles(Dataset):
    def __init__(self, paths: list[Path], transform: Callable[[np.ndarray], torch.Tensor],
                 keep_image: bool = False) -> None:
        self.paths, self.transform, self.keep_image = paths, transform, keep_image

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> dict:
        if not self.keep_image:
            image = read_image(self.paths[index])
            return {"image": self.transform(image), "size": image.shape[:2], "index": index,
                    "original": None, "alpha": None}
        image, alpha = read_image_alpha(self.paths[index])  # a cut-out keeps the alpha
        return {"image": self.transform(image), "size": image.shape[:2], "index": index,
                "original": image, "alpha": alpha}


def _collate(items: list[dict]) -> dict:
    return {
        "image": torch.stack([it["image"] for it in items]),
        "size": [it["size"] for it in items],
        "index": [it["index"] for it in items],
        "original": [it.get("original") for it in items],
        "alpha": [it.get("alpha") for it in items],
    }


def probe_memory(model: nn.Module, transform: Callable[[np.ndarray], torch.Tensor],
                 runtime: Runtime, size: int, tta: Sequence[str] = (),
                 precision: str = "fp32", source: Path | None = None) -> int | None:
    """Bytes one image adds to :func:`predict_files`' and :func:`~sodkit.inference.forward.
    predict_arrays`' forward pass at ``size`` (:func:`sodkit.engine.batch_memory.
    forward_memory`; None: unknown). ``source``: the model file the network was loaded from,
    whose answer on the CPU is remembered for the next run (:mod:`sodkit.engine.probe_cache`).
    """
    from . import probe_cache
    from .batch_memory import RESIDENT_SLACK, _heap_in_use, forward_memory, probe_side

    measure = getattr(model, "memory_per_image", None)  # onnxruntime's session: its arena
    onnx = measure is not None and runtime.device.type == "cpu"
    key = None
    if source is not None and runtime.device.type == "cpu":
        key = probe_cache.probe_key(Path(source), size, "cpu-onnx" if onnx else "cpu",
                                    tuple(tta), precision)
        known = probe_cache.recall(key)
        if known is not None:
            return known
        if getattr(runtime, "is_main", True):
            logger.info("measuring one image's memory at %d px to choose the batch (two "
                        "forward passes at %d px, once for this model file)", size,
                        probe_side(size))
    if onnx:
        side = probe_side(size)
        added = measure(side, _heap_in_use())
        per_image = (None if added is None
                     else math.ceil(added * (size / side) ** 2 * RESIDENT_SLACK))
    else:
        post = postprocess_of(transform)

        def run(batch: torch.Tensor) -> None:
            with eval_mode(model):
                predict_scores(model, batch, runtime, post, precision, tta=tta)

        per_image = forward_memory(run, size, runtime.device)
    probe_cache.remember(key, per_image)
    return per_image


def _encoded(batch: dict | None, probs: torch.Tensor | None, targets: list[dict[str, Path]],
             post: Postprocess, outputs: Outputs) -> list[tuple[Path, bytes]]:
    """One batch's files: each image's scores at its own size, as each of ``outputs`` (one
    forward pass, every kind: :func:`~sodkit.inference.encode.encode_outputs`), to the paths
    ``targets`` gives each kind (run beside the next forward pass: :mod:`sodkit.engine.overlap`).
    """
    if batch is None or probs is None:
        return []
    return [(target[kind], data)
            for i, (size, target) in enumerate(zip(batch["size"], targets, strict=True))
            for kind, data in encode_outputs(post, probs[i : i + 1], tuple(size), outputs,
                                             batch["original"][i], batch["alpha"][i])]


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
        with warnings.catch_warnings():  # torch's advice on the worker count: cap_workers
            # decided the count, and said so where it lowered the user's
            warnings.filterwarnings("ignore", "This DataLoader will create", UserWarning)
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
    *,
    outputs: Outputs | None = None,
    targets: Sequence[dict[str, Path]] | None = None,
    where: str | None = None,
    progress: bool = False,
    precision: str = "fp32",
) -> list[Path]:
    """Write ``out_dir/<stem>.png`` for every input; returns this rank's predicted files.

    ``rendering`` (``--save``): what each PNG holds (:mod:`sodkit.inference.render`); None:
    the mask.
    ``outputs``: several kinds from one forward pass instead, ``(kind, rendering)`` each, with
    ``targets``: each path's output file by kind (:func:`sodkit.predict_plan.resolve`), and
    ``where`` they go, for the last line. ``progress``: a bar or log lines as it goes.

    Under torchrun each rank predicts its own contiguous shard of ``paths``; rank 0 writes.
    ``out_dir``: the folder, or the output folder the command claimed (its rules apply).
    ``skip_bad``: an image that cannot be read is left out and listed, not an error.
    ``precision``: the forward's autocast (``--precision bf16`` / ``fp16``).
    ``images``: the batches, already decoding (:class:`ImageBatches` of the same ``paths``,
    ``batch_size`` and ``skip_bad``); None: made here from ``transform`` and ``num_workers``.
    """
    folder = out_dir if isinstance(out_dir, OutputFolder) else OutputFolder.at(out_dir)
    out_dir = folder.root if isinstance(out_dir, OutputFolder) else Path(out_dir)
    if outputs is None:
        outputs = [(rendering.mode if rendering is not None else "mask", rendering)]
    keep = any(r is not None and r.needs_image for _, r in outputs)
    if images is None:
        images = ImageBatches(paths, transform, runtime, batch_size, num_workers, keep, skip_bad)
    elif (images.paths, images.batch_size, images.skip_bad) != (paths, batch_size, skip_bad):
        raise ValueError("predict_files: images made for other paths, batch size or skip_bad")
    mine = images.mine
    first = shard_range(len(paths), runtime.rank, runtime.world_size).start
    writer = MaskWriter(runtime, len(paths), batch_size, folder)
    post = postprocess_of(transform)  # the output side of the transform's pipeline
    shown = Progress(len(paths), "predicting", unit="image",
                     enabled=progress and runtime.is_main, log=logger, summary=True, early=True)
    written: list[Path] = []
    try:
        with shown, eval_mode(model), OutputThread(writer, runtime) as output:
            for round_ in range(writer.rounds):  # every rank the same rounds (see MaskWriter)
                batch = images.next()
                probs = None if batch is None else predict_scores(
                    model, runtime.on_device(batch["image"]), runtime, post, precision,
                    tta=tta)
                agree_on_round(runtime, probs, [mine[i].name for i in batch["index"]] if batch
                               else [], precision)
                files = [] if batch is None else [
                    targets[first + i] if targets is not None
                    else {outputs[0][0]: inside(out_dir, f"{mine[i].stem}.png")}
                    for i in batch["index"]]
                written += [path for chosen in files for path in chosen.values()]
                output.put(lambda b=batch, p=probs, t=files: _encoded(b, p, t, post, outputs))
                shown.update(_round_size(len(paths), runtime.world_size, batch_size, round_))
    finally:
        images.close()
    left_out = report_skipped(runtime, [(mine[i], why) for i, why in images.skipped]
                              ) if skip_bad else 0
    done = len(paths) - left_out
    logger.info("wrote %s to %s", and_list([plural(done, NOUNS[kind]) for kind, _ in outputs]),
                where or out_dir)
    return written


def _round_size(items: int, world: int, batch_size: int, round_: int) -> int:
    """Images every rank together predicts in round ``round_`` (each rank its own shard)."""
    sizes = [len(shard_range(items, rank, world)) for rank in range(world)]
    return sum(min(batch_size, max(size - round_ * batch_size, 0)) for size in sizes)
