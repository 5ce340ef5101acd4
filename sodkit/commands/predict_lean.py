"""``sodkit predict`` without torch: when everything asked can be done from a cached ONNX graph
on the CPU, the command imports neither torch, torchvision nor timm (their import was 3 s of
its start, against a bare onnxruntime loop's 0.3 s: benchmarks/predict_vs_onnx.py).

Taken when (:func:`lean_plan`, each checked without torch; anything else, or any doubt, is the
full path of :mod:`sodkit.commands.predict`, with the same results):

- the runtime is onnxruntime on the CPU: ``--runtime auto|onnx`` at fp32 or int8, ``--device
  cpu``, or ``auto`` on a machine with no GPU device file (/dev/nvidiactl, /dev/kfd, ...);
  one process (no torchrun);
- images only (a video takes the full path);
- the model file (``--checkpoint``, or ``--model NAME`` already in the cache) has an entry in
  the graphs' index (:mod:`sodkit.runners.graph_index`, written by the full path's first run)
  for ``--weights``, the precision and ``--size``, and its graph is there;
- the batch is known without measuring the network (given, small enough, or measured before:
  :mod:`sodkit.engine.probe_cache`).

The work is the full path's, in numpy: the pipeline's steps
(:mod:`sodkit.inference.numpy_pipelines`), decoding ahead in threads (OpenCV and Pillow release
the GIL), the same PNG encoding (:func:`~sodkit.inference.encode.encode_outputs`), output
folder, opening line, progress and ``--skip-bad``. The parts of ``sodkit predict`` that need no
torch live here and both paths use them (the batch, the claim, the opening line).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine.batch_choice import BatchChoice
    from ..inference.numpy_pipelines import NumpyPipeline
    from ..predict_plan import Targets
    from ..runners.choice import Choice
    from ..runners.graph_index import Entry

logger = logging.getLogger(__name__)

DEFAULT_WORKERS = 2
GPU_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")  # NVIDIA, ROCm, WSL
OFF_ENV = "SODKIT_PREDICT_LEAN"  # 0: always the full path
CPU = SimpleNamespace(type="cpu")  # the device, as the batch rules read it


@dataclass(frozen=True)
class LeanPlan:
    """What the torch-free path runs: the graph and its pipeline, the forward's threads, the
    test-time augmentation, the batch and the decoding threads."""

    entry: Entry
    choice: Choice
    threads: int
    tta: tuple[str, ...]
    batch: BatchChoice
    workers: int


def decode_workers(args: argparse.Namespace, images: int) -> int:
    """``--workers`` (default :data:`DEFAULT_WORKERS`), at most one an image."""
    from ..resources import cap_workers

    if not images:
        return 0
    return cap_workers(DEFAULT_WORKERS if args.workers is None else args.workers, images,
                       None if args.workers is None else "--workers")


def no_gpu() -> bool:
    """Whether this machine surely has no GPU PyTorch could use (Linux, no device file)."""
    return sys.platform.startswith("linux") and not any(map(os.path.exists, GPU_FILES))


def lean_plan(args: argparse.Namespace, paths: list[Path], videos: bool, outputs: list,
              largest: tuple[int, int]) -> LeanPlan | None:
    """The torch-free path's plan, or None where the full path must run (never an error: the
    full path says what is wrong)."""
    if videos or not paths or os.environ.get(OFF_ENV, "1") == "0":
        return None
    if os.environ.get("WORLD_SIZE", "1") != "1":
        return None
    if not (args.device == "cpu" or (args.device == "auto" and no_gpu())):
        return None
    try:
        return _plan(args, paths, outputs, largest)
    except Exception as exc:  # noqa: BLE001 - the full path runs, and says what is wrong
        logger.debug("predict: the full path (%s)", exc)
        return None


def _plan(args: argparse.Namespace, paths: list[Path], outputs: list,
          largest: tuple[int, int]) -> LeanPlan | None:
    from ..engine import probe_cache
    from ..engine.batch_choice import worth_probing
    from ..resources import default_threads
    from ..runners import graph_index
    from ..runners.choice import choose
    from ..runners.onnx_cache import cache_folder, file_sha256, versions

    source = _model_file(args)
    if source is None or args.precision not in ("fp32", "int8"):
        return None
    key = graph_index.index_key(file_sha256(source), args.weights, args.precision, versions())
    entry = graph_index.lookup(cache_folder(), key, args.size)
    if entry is None:  # said before onnxruntime is imported: the full path's start as before
        return None
    choice = choose(args.runtime, args.precision, "cpu")
    if choice.runtime != "onnx" or choice.precision != args.precision:
        return None
    tta = entry.tta if args.tta is None else tuple(args.tta)
    workers = decode_workers(args, len(paths))
    keep = any(r is not None and r.needs_image for _, r in outputs)
    per_image = None
    if worth_probing(entry.size, CPU, args.batch_size):
        per_image = probe_cache.recall(probe_cache.probe_key(source, entry.size, "cpu-onnx",
                                                             tta, "fp32"))
        if per_image is None:  # the full path measures it (once for this model file)
            return None
    batch = choose_predict_batch(per_image, entry.size, CPU, args, outputs, keep, largest,
                                 workers)
    return LeanPlan(entry, choice, args.threads or default_threads(), tta, batch, workers)


def _model_file(args: argparse.Namespace) -> Path | None:
    """``--checkpoint``, or ``--model NAME``'s file when it is cached whole (else None: the
    full path fetches it)."""
    if getattr(args, "model", None):
        from ..published.catalogue import get_entry
        from ..published.fetch import cached

        return cached(get_entry(args.model))
    path = Path(args.checkpoint)
    return path if path.is_file() else None


def choose_predict_batch(per_image: int | None, size: int, device: Any,
                         args: argparse.Namespace, outputs: list, keep: bool,
                         largest: tuple[int, int], workers: int, clips: bool = False
                         ) -> BatchChoice:
    """``--batch-size``, or the batch chosen from the probe's memory per image (None: not
    probed) and, for a cut-out or an overlay, each photo's original in every batch in flight
    (decoded ahead by each worker, in the forward pass, waiting to be written: 2 per worker
    and 3); with ``clips``, each frame (RGB) in every batch a clip holds
    (:data:`sodkit.video.IN_FLIGHT`); beside the batch, what the largest photo costs at its
    own size in the output thread (one at a time): its float32 map, and its foreground
    estimate."""
    from ..engine.batch_choice import choose_batch
    from ..foreground import ML_BYTES_PER_PIXEL
    from ..video import IN_FLIGHT

    pixels = largest[0] * largest[1]
    known = max(pixels * 4 * (2 * workers + 3) if keep else 0,  # RGB + alpha, in flight
                pixels * 3 * IN_FLIGHT if clips else 0)  # a clip's frames
    foreground = any(r is not None and r.estimator == "ml" for _, r in outputs)
    fixed = pixels * (4 + (ML_BYTES_PER_PIXEL if foreground else 0))
    return choose_batch(per_image, size, device, args.batch_size, "--batch-size", fixed, known)


def say_opening(what: str, model: str, size: int, where: str, runner: str, threads: int,
                choice: BatchChoice, decoding: str, outputs: list, count: int,
                to: str) -> None:
    """What the command will do, before it does it: the first line of a long run."""
    from ..inference.render import NOUNS
    from ..text import and_list, noun_for, plural

    kinds = and_list([noun_for(count, NOUNS[kind]) for kind, _ in outputs])
    logger.info("predicting %s with %s at %d px on %s (%s, %s): %s, %s; %s to %s", what, model,
                size, where, runner, plural(threads, "thread"), choice.describe(), decoding,
                kinds, to)


def claim_outputs(targets: Targets, force: bool) -> Any:
    """The output folder to write through: ``--out`` claimed as ``predict``'s; for a single
    file, the folder it lies in (a missing one created as ``predict``'s)."""
    from ..outputs import claim, single_file

    if not targets.single:
        return claim(targets.out, "predict", force=force)
    if not targets.out.parent.exists():
        claim(targets.out.parent, "predict")
    return single_file(targets.out if len(targets.kinds) == 1 else
                       targets.path("", targets.kinds[0]), "predict", force, "--out")


def predict_lean(plan: LeanPlan, args: argparse.Namespace, paths: list[Path],
                 targets: Targets, files: list[dict[str, Path]], outputs: list) -> int:
    """Predict ``paths`` into ``files`` (the checks are done) on the cached graph."""
    from ..inference.numpy_pipelines import NumpyPipeline
    from ..inference.onnx_session import open_session
    from ..runners.onnx_cache import optimised_path
    from .predict_videos import describe

    entry = plan.entry
    post = NumpyPipeline(entry.pipeline, entry.size, entry.mean, entry.std)
    session = open_session(entry.graph, plan.threads, optimised=optimised_path(entry.graph))
    decoding = (f"{plan.workers} decoding thread{'s' if plan.workers != 1 else ''}"
                if plan.workers else "decoding in this process")
    say_opening(describe(len(paths), []), f"{entry.name}/{entry.backbone}", entry.size,
                "cpu", plan.choice.describe(), plan.threads, plan.batch, decoding, outputs,
                len(paths), targets.where())
    folder = claim_outputs(targets, args.force)
    skipped = _run(session, post, plan, args, paths, files, outputs, folder)
    _say_done(args, paths, skipped, outputs, targets)
    return 0


Item = tuple[int, Any, tuple[int, int], Any, Any]  # index, input, size, original, alpha


def _decode(path: Path, post: NumpyPipeline, keep: bool, index: int) -> Item | str:
    """One image decoded and preprocessed, or why it cannot be read (a DataError's text)."""
    from ..errors import DataError
    from ..imageio import read_image, read_image_alpha

    try:
        image, alpha = read_image_alpha(path) if keep else (read_image(path), None)
    except DataError as exc:
        return str(exc)
    return index, post.preprocess(image), image.shape[:2], image if keep else None, alpha


def _decoded(paths: list[Path], post: NumpyPipeline, keep: bool, workers: int, ahead: int
             ) -> Any:
    """Each image's :func:`_decode`, in order; ``workers`` threads read up to ``ahead``
    images ahead (none: this thread decodes each when it is asked for)."""
    if not workers:
        yield from (_decode(path, post, keep, i) for i, path in enumerate(paths))
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="sodkit-decode") as pool:
        pending: deque[Future] = deque()
        for i, path in enumerate(paths):
            pending.append(pool.submit(_decode, path, post, keep, i))
            if len(pending) > ahead:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _run(session: Any, post: NumpyPipeline, plan: LeanPlan, args: argparse.Namespace,
         paths: list[Path], files: list[dict[str, Path]], outputs: list, folder: Any
         ) -> list[tuple[Path, str]]:
    """The batches: decoded ahead, run, encoded and written in a thread beside the next
    forward pass; returns the images left out (``--skip-bad``)."""
    from ..progress import Progress

    keep = any(r is not None and r.needs_image for _, r in outputs)
    batch_size = plan.batch.batch
    items = _decoded(paths, post, keep, plan.workers, batch_size * (plan.workers + 1))
    name = session.get_inputs()[0].name

    def run(batch: Any) -> Any:
        return session.run(None, {name: batch})[0]

    skipped: list[tuple[Path, str]] = []
    shown = Progress(len(paths), "predicting", unit="image", log=logger, summary=True,
                     early=True)
    with shown, _Writer(folder) as writer, contextlib.closing(items):
        for start in range(0, len(paths), batch_size):
            chunk = [next(items) for _ in range(min(batch_size, len(paths) - start))]
            good = [item for item in chunk if not isinstance(item, str)]
            for i, item in enumerate(chunk):
                if isinstance(item, str):
                    skipped.append((paths[start + i], _unreadable(item, args.skip_bad)))
            if good:
                scores = _scores(post, run, good, plan.tta, paths)
                writer.put(lambda s=scores, g=good: _encoded(post, s, g, files, outputs))
            shown.update(len(chunk))
    return skipped


def _unreadable(message: str, skip_bad: bool) -> str:
    from ..engine.skip_bad import unreadable
    from ..errors import DataError

    if not skip_bad:
        raise unreadable(DataError(message))
    return message


def _scores(post: NumpyPipeline, run: Callable[[Any], Any], good: list[Item],
            tta: Sequence[str], paths: list[Path]) -> Any:
    """The batch's scores; non-finite ones are an error, as in the full path."""
    import numpy as np

    from ..errors import UserError

    scores = post.scores(run, np.stack([item[1] for item in good]), tta)
    if not np.isfinite(scores).all():
        names = ", ".join(paths[item[0]].name for item in good[:3])
        raise UserError(f"the network predicted NaN or infinite values for {names}; nothing "
                        f"of this batch is written (the weights or data.mean / data.std are "
                        f"broken)")
    return scores


def _encoded(post: NumpyPipeline, scores: Any, good: list[Item],
             files: list[dict[str, Path]], outputs: list) -> list[tuple[Path, bytes]]:
    from ..inference.encode import encode_outputs

    return [(files[index][kind], data)
            for row, (index, _, size, original, alpha) in enumerate(good)
            for kind, data in encode_outputs(post, scores[row : row + 1], size, outputs,
                                             original, alpha)]


class _Writer:
    """Encodes and writes each batch's files in one thread, at most two batches behind; on
    leaving (with an error too) the batches handed over are written."""

    def __init__(self, folder: Any, depth: int = 2) -> None:
        self.folder, self.depth = folder, depth
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="sodkit-masks")
        self.pending: deque[Future] = deque()

    def put(self, make_files: Callable[[], list[tuple[Path, bytes]]]) -> None:
        self.pending.append(self.pool.submit(lambda: [self.folder.write_bytes(path, data)
                                                      for path, data in make_files()]))
        while len(self.pending) > self.depth:
            self.pending.popleft().result()

    def __enter__(self) -> _Writer:
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            while kind is None and self.pending:
                self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True)


def _say_done(args: argparse.Namespace, paths: list[Path], skipped: list[tuple[Path, str]],
              outputs: list, targets: Targets) -> None:
    from ..engine.skip_bad import log_skipped
    from ..inference.render import NOUNS
    from ..text import and_list, plural

    done = len(paths) - (log_skipped(skipped) if args.skip_bad else 0)
    logger.info("wrote %s to %s", and_list([plural(done, NOUNS[kind]) for kind, _ in outputs]),
                targets.where())
