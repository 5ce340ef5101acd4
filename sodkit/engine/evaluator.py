"""Inference over the test sets -> predictions at GT size -> metrics -> files in the run folder.

Each rank runs its own contiguous shard of every test set once (no padding duplicates), keeps
per-image metric records, and rank 0 merges all records and computes the final numbers once, so a
distributed evaluation gives exactly the single-process numbers. The prediction is quantised to
uint8 here, once, and that array is both written as PNG and measured: evaluating the saved PNGs
later gives the same numbers. The :class:`~sodkit.report.run_results.EvalResult` returned is
written to the run folder by :mod:`sodkit.report.run_results` (the trainer, ``sodkit test``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from ..config import Config
from ..errors import Preempted, UserError
from ..imageio import encode_mask
from ..metrics import SODMetrics
from ..outputs import OutputFolder
from ..paths import inside
from ..progress import Progress
from ..report.run_results import EVAL_FILES, EvalResult
from ..visualize import denormalize, to_rgb
from .runtime import Runtime, eval_mode

logger = logging.getLogger(__name__)


class MaskWriter:
    """Rank 0 writes every rank's masks: each rank encodes its PNGs, and in lockstep rounds (one
    per batch of the longest shard, empty ones for shorter shards) rank 0 gathers and writes them.

    So a job on several machines needs no shared folder for predictions, and no file is written
    by two processes. One process: the masks are written at once. Each is written and recorded
    by ``outputs``, the output folder it goes to (it replaces only masks sodkit wrote there).
    """

    def __init__(self, runtime: Runtime, items: int, batch_size: int,
                 outputs: OutputFolder | None) -> None:
        self.runtime = runtime
        self.outputs = outputs  # None: nothing written (and no collective)
        longest_shard = math.ceil(items / runtime.world_size)
        self.rounds = math.ceil(longest_shard / batch_size)

    def send(self, files: list[tuple[Path, bytes]]) -> None:
        """This rank's files of one batch (every rank calls it once per round; an evaluation
        that writes nothing sends nothing and makes no collective)."""
        if self.outputs is None:
            return
        for part in self.runtime.gather_to_main(files) or []:
            for path, data in part:
                self.outputs.write_bytes(path, data)


TTA = ("hflip",)  # eval.tta values


def predict_probabilities(
    model: nn.Module, images: torch.Tensor, runtime: Runtime, precision: str = "fp32",
    tta: Sequence[str] = (),
) -> torch.Tensor:
    """Saliency probabilities (B, 1, h, w) in float32 for a normalised batch; the forward runs
    at ``precision`` (``eval.precision``: fp32 unless the config says otherwise).

    ``tta`` (``eval.tta``): ``hflip`` adds a pass on the mirrored images, mirrored back; the
    result is the mean of the passes' probabilities (averaging probabilities, not logits, so
    one confident pass cannot outvote the other without bound).
    """
    unknown = set(tta) - set(TTA)
    if unknown:
        raise ValueError(f"eval.tta: unknown {sorted(unknown)} (known: {list(TTA)})")
    with runtime.autocast(precision):
        logits = model(images)["logits"]
    probs = torch.sigmoid(logits.float())
    if "hflip" in tta:
        with runtime.autocast(precision):
            flipped = model(images.flip(-1))["logits"]
        probs = (probs + torch.sigmoid(flipped.float()).flip(-1)) / 2
    return probs


def agree_on_round(runtime: Runtime, probs: torch.Tensor | None, names: Sequence[str],
                   precision: str = "fp32", stop: bool = False) -> None:
    """The one agreement every rank makes per round of predictions (a rank whose shard is done
    joins with ``probs`` None): a stop, and non-finite probabilities, seen on any rank.

    NaN probabilities quantise to 0: an all-black mask, written and measured as if it were a
    prediction; a batch holding any is an error instead, on every rank at once, so that none is
    left waiting in a gather.

    Raises:
        Preempted: ``stop`` on some rank (a stop signal during an evaluation).
        UserError: non-finite probabilities on some rank.
    """
    mine = probs is not None and not bool(torch.isfinite(probs).all())
    stopping, broken = runtime.any_rank(stop, mine)
    if stopping:
        raise Preempted("stopped during an evaluation")
    if broken:
        where = f"for {', '.join(names[:3])}" if mine else "on another process's images"
        hint = ("eval.precision fp16 overflowed: use fp32 or bf16" if precision == "fp16" else
                "the weights or data.mean / data.std are broken")
        raise UserError(f"the network predicted NaN or infinite values {where}; nothing of this "
                        f"batch is written ({hint})")


def probability_at(prob: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """One (1, 1, h, w) probability map resized to ``size`` (bilinear), as (H, W) float32: what
    :func:`to_uint8_at` quantises, and what the Python API and the cut-outs read."""
    if tuple(prob.shape[-2:]) != tuple(size):
        prob = F.interpolate(prob, size=size, mode="bilinear", align_corners=False)
    return prob[0, 0]


def to_uint8_at(prob: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """Resize one (1, 1, h, w) probability map to ``size`` (bilinear) and quantise like a PNG."""
    return probability_at(prob, size).mul(255.0).round_().clamp_(0, 255).to(torch.uint8).cpu(
        ).numpy()


def evaluate(
    model: nn.Module,
    loaders: dict[str, DataLoader],
    runtime: Runtime,
    cfg: Config,
    pred_root: Path | None,
    stop: Callable[[], bool] | None = None,
) -> EvalResult:
    """Run every test set; write ``pred_root/<dataset>/<stem>.png`` when ``pred_root`` is set.

    Args:
        stop: asked before every batch (agreed over the ranks, so they all stop at the same
            round): true raises :class:`~sodkit.errors.Preempted`, so that a stop signal during
            a long evaluation ends the process within a batch, not at the stop deadline.
    """
    net = runtime.unwrap(model)
    result = EvalResult()
    with eval_mode(net):
        for name, loader in loaders.items():
            metrics, samples = _run_dataset(net, loader, runtime, cfg, pred_root, name, stop)
            merged = _merge_on_main(metrics, runtime)
            if runtime.is_main:
                result.metrics[name] = merged.compute()
                result.per_image += _per_image(merged, loader, pred_root, name)
                result.folders[name] = _input_folders(loader.dataset.pairs)
                if not result.samples:
                    result.samples = [row for _, row in samples]
                    result.sample_names = [(name, stem) for stem, _ in samples]
    runtime.barrier()
    return result


def _run_dataset(
    net: nn.Module,
    loader: DataLoader,
    runtime: Runtime,
    cfg: Config,
    pred_root: Path | None,
    name: str,
    stop: Callable[[], bool] | None = None,
) -> tuple[SODMetrics, list[list[np.ndarray]]]:
    from ..imageio import read_image_at
    from ..metrics.families import reads_images
    from ..metrics.keys import families_with
    from ..trimap import read_trimap
    from .postprocess import postprocess_of, predict_scores  # it imports this module

    post = postprocess_of(loader.dataset.transform)  # data.preprocess's output side
    metrics = SODMetrics(families=families_with(cfg.eval.compute, cfg.eval.metric))
    with_images = reads_images(metrics.families)  # CCM: each GT's image, read at its size
    trimaps = loader.dataset.trimaps if "matting" in metrics.families else None
    samples: list[tuple[str, list[np.ndarray]]] = []  # (stem, image | GT | prediction)
    want_samples = cfg.eval.num_samples if runtime.is_main else 0
    outputs = OutputFolder.at(pred_root) if pred_root is not None else None
    writer = MaskWriter(runtime, len(loader.dataset), loader.batch_size, outputs)
    batches = iter(loader)
    progress = Progress(len(loader.dataset), f"evaluating {name}", unit="image",
                        enabled=runtime.is_main, summary=True)
    with progress:
        for _ in range(writer.rounds):  # every rank the same rounds; shorter shards idle
            batch = next(batches, None)
            probs = None if batch is None else predict_scores(
                net, runtime.on_device(batch["image"]), runtime, post,
                cfg.eval.precision, cfg.eval.tta)
            agree_on_round(runtime, probs, batch["name"] if batch else [], cfg.eval.precision,
                           stop=stop is not None and stop())
            if batch is None:
                writer.send([])
                progress.update(loader.batch_size * runtime.world_size)
                continue
            files = []
            for i, gt in enumerate(batch["gt"]):
                pred = post.to_mask(probs[i : i + 1], gt.shape)
                if pred_root is not None:
                    files.append((inside(pred_root, name, f"{batch['name'][i]}.png"),
                                  encode_mask(pred)))
                index = int(batch["index"][i])
                image = (read_image_at(loader.dataset.pairs[index].image, gt.shape)
                         if with_images else None)
                trimap = (None if not trimaps else
                          read_trimap(trimaps[loader.dataset.pairs[index].stem], gt.shape))
                metrics.update(pred, gt, index=index, image=image, trimap=trimap)
                if len(samples) < want_samples:
                    tile = denormalize(batch["image"][i], cfg.data.mean, cfg.data.std)
                    size = tile.shape[:2]
                    prediction = to_rgb(post.probabilities(probs[i]), size)
                    samples.append((batch["name"][i], [tile, to_rgb(gt, size), prediction]))
            writer.send(files)
            progress.update(loader.batch_size * runtime.world_size)
    return metrics, samples


def _merge_on_main(metrics: SODMetrics, runtime: Runtime) -> SODMetrics:
    states = runtime.gather_to_main(metrics.state_dict())
    if states is None:  # not rank 0: only rank 0 computes and writes
        return metrics
    return SODMetrics.from_states(states)


def _per_image(metrics: SODMetrics, loader: DataLoader, pred_root: Path | None,
               name: str) -> list[dict[str, str]]:
    """Rows of ``results_per_image.csv``: each image's scores and its image / GT / prediction
    files (the prediction relative to the output folder, where ``pred_root`` puts it)."""
    from ..report import per_image_rows

    def prediction(stem: str) -> str:
        return f"{pred_root.name}/{name}/{stem}.png" if pred_root is not None else ""

    files = [(p.stem, str(p.image.resolve()), str(p.mask.resolve()), prediction(p.stem))
             for p in loader.dataset.pairs]
    return per_image_rows(name, "", metrics.per_image(), files)


def _input_folders(pairs: list) -> dict[str, list[str]]:
    """The image and mask folders of a dataset (``datasets.json``: ``sodkit report`` shows the
    images of these folders, and of the run folder, and nothing else)."""
    from ..report.confine import folders_of

    return {"images": folders_of(p.image for p in pairs),
            "masks": folders_of(p.mask for p in pairs)}


def eval_output_paths(run_dir: Path, loaders: dict[str, DataLoader],
                      pred_root: Path | None) -> list[Path]:
    """Every file :func:`evaluate` and ``write_eval_outputs`` (:mod:`sodkit.report.run_results`)
    may write, report.html included (to check them before any work: ``OutputFolder.check``)."""
    paths = [run_dir / name for name in EVAL_FILES]
    for name, loader in loaders.items() if pred_root is not None else ():
        paths += [inside(pred_root, name, f"{pair.stem}.png") for pair in loader.dataset.pairs]
    return paths
