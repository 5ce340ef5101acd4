"""Inference over the test sets -> predictions at GT size -> metrics -> files in the run folder.

Each rank runs its own contiguous shard of every test set once (no padding duplicates), keeps
per-image metric records, and rank 0 merges all records and computes the final numbers once, so a
distributed evaluation gives exactly the single-process numbers. The prediction is quantised to
uint8 here, once, and that array is both written as PNG and measured: evaluating the saved PNGs
later gives the same numbers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from ..config import Config
from ..imageio import write_mask
from ..metrics import SODMetrics, scalar_metrics
from ..visualize import denormalize, make_grid, to_rgb
from .runtime import Runtime, eval_mode

logger = logging.getLogger(__name__)


@dataclass
class EvalResult:
    """Rank 0 holds the merged metrics; other ranks hold empty dicts."""

    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # dataset -> compute()
    samples: list[list[np.ndarray]] = field(default_factory=list)  # rows of image | GT | pred

    def scalars(self) -> dict[str, dict[str, float]]:
        return {name: scalar_metrics(result) for name, result in self.metrics.items()}


def predict_probabilities(
    model: nn.Module, images: torch.Tensor, runtime: Runtime, precision: str = "fp32"
) -> torch.Tensor:
    """Saliency probabilities (B, 1, h, w) in float32 for a normalised batch; the forward runs
    at ``precision`` (``eval.precision``: fp32 unless the config says otherwise)."""
    with runtime.autocast(precision):
        logits = model(images)["logits"]
    return torch.sigmoid(logits.float())


def to_uint8_at(prob: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """Resize one (1, 1, h, w) probability map to ``size`` (bilinear) and quantise like a PNG."""
    if tuple(prob.shape[-2:]) != tuple(size):
        prob = F.interpolate(prob, size=size, mode="bilinear", align_corners=False)
    return prob[0, 0].mul(255.0).round_().clamp_(0, 255).to(torch.uint8).cpu().numpy()


def evaluate(
    model: nn.Module,
    loaders: dict[str, DataLoader],
    runtime: Runtime,
    cfg: Config,
    pred_root: Path | None,
) -> EvalResult:
    """Run every test set; write ``pred_root/<dataset>/<stem>.png`` when ``pred_root`` is set."""
    net = runtime.unwrap(model)
    result = EvalResult()
    with eval_mode(net):
        for name, loader in loaders.items():
            metrics, samples = _run_dataset(net, loader, runtime, cfg, pred_root, name)
            merged = _merge_on_main(metrics, runtime)
            if runtime.is_main:
                result.metrics[name] = merged.compute()
                if not result.samples:
                    result.samples = samples
    runtime.barrier()
    return result


def _run_dataset(
    net: nn.Module,
    loader: DataLoader,
    runtime: Runtime,
    cfg: Config,
    pred_root: Path | None,
    name: str,
) -> tuple[SODMetrics, list[list[np.ndarray]]]:
    metrics = SODMetrics()
    samples: list[list[np.ndarray]] = []
    want_samples = cfg.eval.num_samples if runtime.is_main else 0
    for batch in loader:
        images = batch["image"].to(runtime.device, non_blocking=True)
        probs = predict_probabilities(net, images, runtime, cfg.eval.precision)
        for i, gt in enumerate(batch["gt"]):
            pred = to_uint8_at(probs[i : i + 1], gt.shape)
            if pred_root is not None:
                write_mask(pred_root / name / f"{batch['name'][i]}.png", pred)
            metrics.update(pred, gt, index=int(batch["index"][i]))
            if len(samples) < want_samples:
                tile = denormalize(batch["image"][i], cfg.data.mean, cfg.data.std)
                size = tile.shape[:2]
                samples.append([tile, to_rgb(gt, size), to_rgb(probs[i], size)])
    return metrics, samples


def _merge_on_main(metrics: SODMetrics, runtime: Runtime) -> SODMetrics:
    states = runtime.gather_objects(metrics.state_dict())
    if not runtime.is_main:
        return metrics
    merged = SODMetrics()
    for state in states:
        part = SODMetrics()
        part.load_state_dict(state)
        merged.merge(part)
    return merged


def samples_image(result: EvalResult) -> np.ndarray | None:
    return make_grid(result.samples) if result.samples else None


def write_eval_outputs(result: EvalResult, run_dir: Path) -> None:
    """results.{json,md,csv}, curves/{pr,fm}.png and samples.png in the run folder (rank 0)."""
    from ..report import plot_curves, write_results
    from ..visualize import write_rgb

    scalars = result.scalars()
    write_results(scalars, run_dir, row_label="dataset")
    plot_curves(result.metrics, run_dir / "curves")
    grid = samples_image(result)
    if grid is not None:
        write_rgb(run_dir / "samples.png", grid)
    for name, values in scalars.items():
        shown = ", ".join(f"{k} {values[k]:.4f}" for k in
                          ("MAE", "Smeasure", "wFmeasure", "maxFm", "maxEm") if k in values)
        logger.info("%s: %s", name, shown)
