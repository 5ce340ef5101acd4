"""What the trainer says: the run's opening lines, each logged step (losses, learning rates,
speed and ETA, to the log and TensorBoard) and the sample images. A mixin of
:class:`~sodkit.engine.trainer.Trainer`, which holds the state these read; kept apart from the
loop itself."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from ..progress import format_rate
from ..report.training import describe_init
from ..text import plural
from ..visualize import denormalize, make_grid, to_rgb
from .logging import Throughput, format_seconds

logger = logging.getLogger("sodkit.engine.trainer")  # the run's lines, under the loop's name


class TrainerLog:
    """The trainer's log lines and TensorBoard scalars and images (rank 0 writes them)."""

    def _log_start(self) -> None:
        net = self.runtime.unwrap(self.model)
        params = sum(p.numel() for p in net.parameters())
        sizes = ", ".join(f"{n}: {len(ld.dataset)}" for n, ld in self.test_loaders.items())
        logger.info("run folder %s", self.run_dir)
        logger.info(
            "model %s/%s, %.2fM parameters; device %s x %d, precision %s",
            self.cfg.model.name, self.cfg.model.backbone, params / 1e6, self.runtime.device,
            self.runtime.world_size, self.cfg.runtime.precision,
        )
        logger.info(
            "train images %d, global batch %d (%d per process x %d accumulated x %s), "
            "%d steps/epoch x %s; test sets: %s",
            len(self.train_loader.dataset), self.global_batch, self.cfg.data.batch_size,
            self.cfg.train.accumulate, plural(self.runtime.world_size, "process"),
            self.steps_per_epoch, plural(self.cfg.train.epochs, "epoch"), sizes or "none",
        )
        for line in getattr(self.train_loader.dataset, "targets", []):
            logger.info("%s", line)  # binary or soft masks, and what the losses see
        lrs = ", ".join(f"{g.get('name', i)} {g['initial_lr']:.2e}"
                        for i, g in enumerate(self.optimizer.param_groups))
        logger.info("effective base LR per group (%s scaling): %s", self.cfg.optim.lr_scaling, lrs)
        if self.resuming and (self.init or self.cfg.model.init_from):  # one line, past tense
            started = (f" (the run started from {self.init.get('file')}: "
                       f"{describe_init(self.init, past=True)})"
                       if isinstance(self.init, dict) else "")
            logger.info("model.init_from is not loaded: a resumed run continues from its own "
                        "checkpoint%s", started)
        elif self.init:
            logger.info("model.init_from: %s", describe_init(self.init))

    def _log_step(
        self, epoch: int, sums: dict[str, torch.Tensor], count: int, meter: Throughput
    ) -> dict[str, str]:
        keys = sorted(sums)
        means = self.runtime.all_reduce_mean(torch.stack([sums[k] for k in keys]) / count).tolist()
        losses = dict(zip(keys, means, strict=True))
        skipped = round(losses.pop("skipped", 0.0) * count)  # fp16 steps the GradScaler skipped
        lrs = {g.get("name", str(i)): g["lr"] for i, g in enumerate(self.optimizer.param_groups)}
        rate = meter.images_per_second()
        remaining = meter.eta(self.step)
        eta = format_seconds(remaining) if math.isfinite(remaining) else "?"
        lr_main = max(lrs.values())
        self.tb.scalars({f"loss/{k}": v for k, v in losses.items()}, self.step)
        self.tb.scalars({f"lr/{k}": v for k, v in lrs.items()}, self.step)
        self.tb.scalars({"perf/images_per_sec": rate, "train/epoch": epoch + 1}, self.step)
        parts = " ".join(f"{k} {v:.4f}" for k, v in losses.items() if k != "loss")
        if "skipped" in sums:
            self.tb.scalars({"amp/skipped_steps": skipped}, self.step)
            parts += f" skipped {skipped}"
        speed = format_rate(rate, "img")  # 4.2 s/img below 1 img/s, not 0.0 img/s
        logger.info(
            "%s loss %.4f (%s) lr %.2e %s eta %s", self.position(), losses["loss"],
            parts, lr_main, speed, eta, extra={"progress": True},
        )
        return {"loss": f"{losses['loss']:.4f}", "lr": f"{lr_main:.2e}", "speed": speed,
                "eta": eta}

    def _log_images(self, batch: dict[str, Any], outputs: dict[str, torch.Tensor]) -> None:
        if not self.runtime.is_main:
            return
        probs = torch.sigmoid(outputs["logits"].detach().float())
        rows = []
        for i in range(min(4, probs.shape[0])):
            tile = denormalize(batch["image"][i], self.cfg.data.mean, self.cfg.data.std)
            size = tile.shape[:2]
            rows.append([tile, to_rgb(batch["mask"][i], size), to_rgb(probs[i], size)])
        self.tb.image("train/image_gt_pred", make_grid(rows), self.step)
