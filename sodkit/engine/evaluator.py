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
from collections.abc import Callable
from pathlib import Path

import numpy as np
from torch import nn
from torch.utils.data import DataLoader

from ..config import Config
from ..imageio import encode_mask
from ..inference.forward import eval_mode, predict_scores
from ..inference.pipelines import postprocess_of
from ..metrics import SODMetrics
from ..outputs import OutputFolder
from ..paths import inside
from ..progress import Progress
from ..report.run_results import EVAL_FILES, EvalResult
from ..visualize import denormalize, to_rgb
from .rounds import MaskWriter, agree_on_round
from .runtime import Runtime

logger = logging.getLogger(__name__)


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
