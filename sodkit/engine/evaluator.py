"""Inference over the test sets -> predictions at GT size -> metrics -> files in the run folder.

Each rank runs its own contiguous shard of every test set once (no padding duplicates), keeps
per-image metric records, and rank 0 merges all records and computes the final numbers once, so a
distributed evaluation gives exactly the single-process numbers. The prediction is quantised to
uint8 here, once, and that array is both written as PNG and measured: evaluating the saved PNGs
later gives the same numbers.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn
from torch.utils.data import DataLoader

from ..config import Config
from ..imageio import encode_mask
from ..inference.forward import eval_mode, predict_scores
from ..inference.pipelines import postprocess_of
from ..metrics import SODMetrics, scalar_metrics
from ..outputs import OutputFolder
from ..paths import inside
from ..progress import Progress
from ..visualize import SAMPLE_COLUMNS, denormalize, labelled_grid, to_rgb
from .rounds import MaskWriter, agree_on_round
from .runtime import Runtime

logger = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """Rank 0 holds the merged metrics; other ranks hold empty dicts."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset -> compute()
    samples: list[list[np.ndarray]] = field(default_factory=list)  # rows of image | GT | pred
    sample_names: list[tuple[str, str]] = field(default_factory=list)  # (dataset, stem) a row
    per_image: list[dict[str, str]] = field(default_factory=list)  # results_per_image.csv rows
    folders: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # datasets.json

    def scalars(self) -> dict[str, dict[str, float]]:
        return {name: scalar_metrics(result) for name, result in self.metrics.items()}


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


def samples_image(result: EvalResult) -> tuple[np.ndarray, dict[str, str]] | None:
    """``samples.png``: image | GT | prediction under column titles, each row with its name,
    MAE and S-measure (from the per-image scores), and the same as the PNG's text."""
    if not result.samples:
        return None
    scores = {(row["dataset"], row["stem"]): row for row in result.per_image}
    labels, lines = [], []
    for dataset, stem in result.sample_names:
        row = scores.get((dataset, stem), {})
        mae, s = (float(row[k]) if k in row else math.nan for k in ("MAE", "Smeasure"))
        labels.append([stem[:24], f"MAE {mae:.4f}", f"S {s:.4f}"])
        lines.append(f"{dataset}/{stem}: MAE {mae:.4f}, Smeasure {s:.4f}")
    grid = labelled_grid(result.samples, SAMPLE_COLUMNS, labels)
    return grid, {"Columns": " | ".join(SAMPLE_COLUMNS), "Rows": "\n".join(lines)}


EVAL_FILES = ("results.json", "results.md", "results.csv", "results_per_image.csv",
              "datasets.json", "curves.json", "curves/pr.png", "curves/fm.png", "samples.png",
              "report.html")


def eval_output_paths(run_dir: Path, loaders: dict[str, DataLoader],
                      pred_root: Path | None) -> list[Path]:
    """Every file :func:`evaluate` and :func:`write_eval_outputs` may write (to check them
    before any work: see ``OutputFolder.check``)."""
    paths = [run_dir / name for name in EVAL_FILES]
    for name, loader in loaders.items() if pred_root is not None else ():
        paths += [inside(pred_root, name, f"{pair.stem}.png") for pair in loader.dataset.pairs]
    return paths


def _output_folder(run_dir: Path | OutputFolder) -> tuple[OutputFolder, Path]:
    if isinstance(run_dir, OutputFolder):
        return run_dir, run_dir.root
    return OutputFolder.at(run_dir), Path(run_dir)


def write_eval_outputs(result: EvalResult, run_dir: Path | OutputFolder,
                       report: bool = True) -> None:
    """results.{json,md,csv}, results_per_image.csv, datasets.json, curves.json,
    curves/{pr,fm}.png, samples.png and (unless ``report`` is false: training writes it after
    its final save, so that it lists the final checkpoints) report.html in the run folder (rank
    0). ``run_dir``: the folder, or the output folder a command claimed (its rules apply: see
    :mod:`sodkit.outputs`)."""
    from ..report import plot_curves, write_curves_json, write_per_image_csv, write_results
    from ..visualize import encode_rgb, png_with_text

    outputs, run_dir = _output_folder(run_dir)
    scalars = result.scalars()
    write_results(scalars, run_dir, row_label="dataset", outputs=outputs)
    write_per_image_csv(result.per_image, run_dir, outputs=outputs)
    write_curves_json(result.metrics, run_dir, outputs=outputs)
    plot_curves(result.metrics, run_dir / "curves", outputs=outputs)
    outputs.write_text(run_dir / "datasets.json", json.dumps(result.folders, indent=2) + "\n")
    samples = samples_image(result)
    if samples is not None:
        outputs.write_bytes(run_dir / "samples.png", png_with_text(encode_rgb(samples[0]),
                                                                   samples[1]))
    from ..metrics.keys import summary_line

    for name, values in scalars.items():
        logger.info("%s: %s", name, summary_line(values))
    if report:
        write_run_report(outputs)


def write_run_report(run_dir: Path | OutputFolder) -> None:
    """``report.html`` of the folder; a failure is a warning: the results are written already
    (a refusal to replace a changed file too, and it says so)."""
    from ..errors import UserError
    from ..report.html import build_report
    from ..report.sources import load_sources

    outputs, run_dir = _output_folder(run_dir)
    try:
        page = build_report(load_sources([run_dir]))
        outputs.write_text(run_dir / "report.html", page)
        logger.info("report: %s", run_dir / "report.html")
    except UserError as exc:
        logger.warning("report.html not written: %s", exc)
    except Exception:  # never lose a finished run over its report
        logger.warning("report.html not written", exc_info=True)
