"""Soft labels end to end (issue 38, item 1): alpha mattes (8- and 16-bit) keep their soft values
through the training path (crop, multi-scale resize, flip, rotation; side-output targets), the
loss terms say which of them assume binary targets and the gradients agree, check-data and the
training log say whether a dataset is binary or soft, and a model fine-tuned on soft mattes
predicts soft edges where the mattes are soft while the same model fine-tuned on binarised
copies does not."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config.schema import DataCfg
from sodkit.data.softness import softness
from sodkit.data.transforms import TrainTransform
from sodkit.loss import LOSSES
from sodkit.loss.criterion import _fit_mask
from sodkit.loss.targets import SOFT_TARGETS

ROOT = Path(__file__).resolve().parents[1]
EDGE = 24  # px: the mattes' soft ramp at 64 px


def _ramp(size: int = 96) -> np.ndarray:
    """A matte whose values are spread over (0, 1): a diagonal ramp with a solid core."""
    y, x = np.mgrid[:size, :size] / (size - 1)
    alpha = np.clip((x + y) / 2 * 1.4 - 0.2, 0, 1)
    return alpha


def _histogram(values: np.ndarray) -> np.ndarray:
    counts, _ = np.histogram(values, bins=10, range=(0, 1))
    return counts / counts.sum()


@pytest.mark.parametrize("bits", [8, 16])
def test_soft_mattes_keep_their_histogram_through_the_training_transform(bits: int) -> None:
    """Crop, multi-scale sizes (square and not), flip and rotation: the targets' histogram
    stays the matte's (no values pushed to 0 or 1); data.binarize makes them 0/1."""
    alpha = _ramp()
    mask = (np.round(alpha * 255).astype(np.uint8) if bits == 8
            else np.round(alpha * 65535).astype(np.uint16))
    image = np.dstack([np.round(alpha * 255).astype(np.uint8)] * 3)
    cfg = DataCfg(crop=0.1, hflip=0.5, rotation=10.0, rotation_p=1.0, color_jitter=0.0)
    transform = TrainTransform(cfg)
    source = _histogram(alpha)
    for seed, size in enumerate([48, 64, (40, 72), 130]):
        torch.manual_seed(seed)
        _, target = transform(image, mask, size)
        values = target.numpy().ravel()
        inner = values[(values > 0.02) & (values < 0.98)]
        assert inner.size > 0.5 * values.size  # most of the ramp stays in between
        assert np.abs(_histogram(values) - source).sum() < 0.25, size
        if bits == 16:  # finer than 8-bit steps: the 16 bits reached the target
            off_grid = np.abs(inner * 255 - np.round(inner * 255)) > 0.02
            assert off_grid.mean() > 0.5
    torch.manual_seed(0)
    _, hard = TrainTransform(DataCfg(binarize=0.5))(image, mask, 64)
    assert set(np.unique(hard.numpy())) <= {0.0, 1.0}


def test_side_output_targets_stay_soft() -> None:
    """Side outputs are supervised with the area-averaged matte: its mean, not a 0/1 map."""
    target = torch.from_numpy(_ramp(64)).float()[None, None]
    small = _fit_mask(target, torch.zeros(1, 1, 16, 16))
    assert torch.allclose(small.mean(), target.mean(), atol=1e-6)
    assert ((small > 0.05) & (small < 0.95)).float().mean() > 0.5


def test_losses_say_which_assume_binary_targets() -> None:
    """Every registered term is listed; those marked exact for soft targets are lowest at
    p = t (any small change raises them), the others (IoU-style ratios) fall when soft pixels
    move off their value (a gradient step from p = t lowers them)."""
    assert set(SOFT_TARGETS) == set(LOSSES.names())
    target = torch.from_numpy(_ramp(32))[None, None].clamp(0.02, 0.98)
    generator = torch.Generator().manual_seed(0)
    for name, (exact, why) in SOFT_TARGETS.items():
        assert why
        term = LOSSES.get(name)()
        logits = torch.logit(target).clone().requires_grad_(True)
        at_target = term(logits, target)
        at_target.backward()
        if exact:
            for _ in range(5):
                moved = logits.detach() + 0.05 * torch.randn(logits.shape, generator=generator,
                                                               dtype=logits.dtype)
                assert term(moved, target) > at_target, name
        else:
            stepped = logits.detach() - 0.2 * logits.grad / logits.grad.abs().max()
            assert logits.grad.abs().max() > 1e-5, name
            assert term(stepped, target) < at_target - 1e-6, name


def _write_mattes(root: Path, count: int, seed: int) -> None:
    """64 px composites of a disc with a soft edge (EDGE px ramp) over another colour: the
    image holds the alpha's edge, the mask the matte (gt) or its binarisation (gt-binary)."""
    rng = np.random.default_rng(seed)
    for folder in ("im", "gt", "gt-binary"):
        (root / folder).mkdir(parents=True)
    y, x = np.mgrid[:64, :64]
    for i in range(count):
        cy, cx, r = rng.uniform(22, 42), rng.uniform(22, 42), rng.uniform(12, 18)
        alpha = np.clip((r + EDGE / 2 - np.hypot(y - cy, x - cx)) / EDGE, 0, 1)
        fg, bg = rng.uniform(170, 250, 3), rng.uniform(10, 80, 3)
        image = alpha[..., None] * fg + (1 - alpha[..., None]) * bg
        image += rng.normal(0, 4, image.shape)
        cv2.imwrite(str(root / "im" / f"{i}.png"), np.clip(image, 0, 255).astype(np.uint8))
        cv2.imwrite(str(root / "gt" / f"{i}.png"), np.round(alpha * 255).astype(np.uint8))
        cv2.imwrite(str(root / "gt-binary" / f"{i}.png"),
                    np.where(alpha >= 0.5, 255, 0).astype(np.uint8))


def _soft_share(predictions: Path, gts: Path) -> float:
    """The share of the soft band's pixels (GT matte in (0.05, 0.95)) predicted in between."""
    inside = total = 0
    for gt_file in sorted(gts.glob("*.png")):
        gt = cv2.imread(str(gt_file), cv2.IMREAD_GRAYSCALE) / 255.0
        pred = cv2.imread(str(predictions / gt_file.name), cv2.IMREAD_GRAYSCALE) / 255.0
        band = (gt > 0.05) & (gt < 0.95)
        inside += int(((pred[band] > 0.05) & (pred[band] < 0.95)).sum())
        total += int(band.sum())
    return inside / total


def _train(root: Path, name: str, masks: str, epochs: int, init: Path | None = None) -> Path:
    """A run of test_resnet's FPN at 32 px on the mattes (3 steps of 16 per epoch), BCE only,
    evaluated on the soft test mattes; its folder."""
    overrides = [f"output_root={root / 'runs'}", f"name={name}", f"train.epochs={epochs}",
                 f"data.train=[{{root: {root / 'train'}, image_dir: im, mask_dir: {masks}}}]",
                 f"data.test=[{{root: {root / 'test'}, image_dir: im, mask_dir: gt, name: M}}]",
                 "eval.metric_dataset=M", "model.backbone=test_resnet", "model.pretrained=null",
                 "model.decoder_channels=16", "data.size=32", "data.batch_size=16",
                 "data.test_batch_size=8", "data.num_workers=0", "optim.lr=1e-2",
                 "loss.terms={bce: 1}", "data.rotation=0", "data.color_jitter=0",
                 "train.log_every=1000", f"train.checkpoint_every={epochs}", "eval.every=0",
                 "train.image_every=0", "eval.num_samples=0", "eval.compute=[matting]"]
    if init is not None:
        overrides.append(f"model.init_from={init}")
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), *overrides]) == 0
    return root / "runs" / name


@pytest.mark.slow
def test_fine_tuning_on_soft_mattes_keeps_soft_edges_and_on_binary_copies_does_not(
        tmp_path: Path) -> None:
    """BiRefNet #308's case: a model that predicts soft edges, fine-tuned on the soft mattes,
    still does where they are soft; fine-tuned on binarised copies of them, it does not."""
    _write_mattes(tmp_path / "train", 48, seed=1)
    _write_mattes(tmp_path / "test", 8, seed=2)
    base = _train(tmp_path, "base", "gt", epochs=20) / "checkpoints" / "last.pt"
    shares = {}
    for masks in ("gt", "gt-binary"):
        run = _train(tmp_path, masks, masks, epochs=30, init=base)
        shares[masks] = _soft_share(run / "predictions" / "M", tmp_path / "test" / "gt")
        log = (run / "train.log").read_text()
        kind = "soft (alpha mattes)" if masks == "gt" else "binary: 0.00%"
        assert f"masks: {kind}" in log and "trained as they are" in log
    assert shares["gt"] > 0.8, shares  # measured: 0.98 (the base model: 1.0)
    assert shares["gt-binary"] < 0.5, shares  # measured: 0.28


def test_check_data_says_binary_or_soft(tmp_path: Path, capsys) -> None:
    _write_mattes(tmp_path / "d", 4, seed=3)
    dataset = f"{{root: {tmp_path / 'd'}, image_dir: im, mask_dir: MASKS}}"
    base = ["check-data", str(ROOT / "configs" / "demo.yaml"), "data.test=[]"]
    assert main([*base, f"data.train=[{dataset.replace('MASKS', 'gt')}]"]) == 0
    assert "soft (" in capsys.readouterr().out
    assert main([*base, f"data.train=[{dataset.replace('MASKS', 'gt-binary')}]"]) == 0
    out = capsys.readouterr().out
    assert "binary (0.00% soft)" in out
    assert softness([np.zeros((4, 4), np.uint8)]).kind == "binary"
