"""Pairs and oracles for the optional metric families (``sodkit.metrics.families``).

The pairs cover what the references treat specially: empty and full GTs, a one-pixel object,
thin structures (1-pixel lines, a diagonal), many components (some under the size-invariant
metrics' 50-pixel threshold), constant and binary predictions, and realistic network outputs.
The BiRefNet oracles restate, directly and unoptimised, the formulas of BiRefNet's
``evaluation/metrics.py`` (it is not a package; PySODMetrics is imported instead where it has the
metric).
"""

from __future__ import annotations

import warnings

import cv2
import numpy as np
import py_sod_metrics as psm

from sodkit.metrics.testing import realistic_pairs

H, W = 48, 64


def _blobs(count: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    gt = np.zeros((H, W), np.uint8)
    for _ in range(count):
        r, c = rng.integers(0, H - size), rng.integers(0, W - size)
        gt[r:r + size, c:c + size] = 255
    return gt


def edge_pairs() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, pred, gt) uint8 pairs of (48, 64), realistic ones first."""
    pairs = [(f"realistic{i}", p, g) for i, (p, g) in enumerate(realistic_pairs(6, H, W, seed=5))]
    rng = np.random.default_rng(7)
    noise = rng.integers(0, 256, (H, W), dtype=np.uint8)
    soft = cv2.GaussianBlur(noise, (0, 0), 3)
    empty, full = np.zeros((H, W), np.uint8), np.full((H, W), 255, np.uint8)
    dot = empty.copy()
    dot[20, 30] = 255
    lines = empty.copy()
    lines[10, 5:60] = 255
    lines[5:45, 40] = 255
    cv2.line(lines, (2, 46), (30, 14), 255, 1)
    many = _blobs(20, 3, 1)
    many[30:40, 2:14] = 255  # one component over 50 pixels among small ones
    pairs += [
        ("empty_gt", soft, empty), ("empty_gt_empty_pred", empty, empty),
        ("full_gt", soft, full), ("full_gt_full_pred", full, full),
        ("one_pixel", soft, dot), ("one_pixel_hit", dot, dot),
        ("thin", cv2.GaussianBlur(lines, (0, 0), 1), lines), ("thin_noise", noise, lines),
        ("many_small", cv2.GaussianBlur(many, (0, 0), 1.5), _blobs(25, 3, 2)),
        ("many_mixed", soft, many), ("constant_pred", np.full((H, W), 77, np.uint8), many),
        ("binary_pred", np.where(soft > 128, 255, 0).astype(np.uint8), _blobs(6, 9, 3)),
    ]
    return pairs


def birefnet_normalise(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """BiRefNet's ``_prepare_data``: ``gt > 128``; ``pred / 255``, min-max scaled unless flat."""
    gt = gt > 128
    pred = pred / 255
    if pred.max() != pred.min():
        pred = (pred - pred.min()) / (pred.max() - pred.min())
    return pred, gt


def birefnet_mse(pairs) -> float:
    """BiRefNet's MSEMeasure: per image ``mean((pred - gt) ** 2)``, then the mean."""
    values = []
    for pred, gt in pairs:
        p, g = birefnet_normalise(pred, gt)
        values.append(np.mean((p - g) ** 2))
    return float(np.mean(np.array(values, np.float64)))


def reference_hce(pairs) -> tuple[float, list[float]]:
    """PySODMetrics' ``HumanCorrectionEffortMeasure``: the dataset's ``hce`` and each image's."""
    hce = psm.HumanCorrectionEffortMeasure()
    for pred, gt in pairs:
        hce.step(pred, gt)
    return float(hce.get_results()["hce"]), [float(v) for v in hce.hces]


def reference_plain_f(pred: np.ndarray, gt: np.ndarray) -> dict[str, float]:
    """MAE and FmeasureV2's F (beta^2 0.3) of one image: its max, mean and adaptive value."""
    mae, fm = psm.MAE(), psm.FmeasureV2(
        {"fm": psm.FmeasureHandler(with_dynamic=True, with_adaptive=True, beta=0.3)})
    mae.step(pred, gt)
    fm.step(pred, gt)
    res = fm.get_results()["fm"]
    return {"siMAE": float(mae.get_results()["mae"]), "simaxFm": float(res["dynamic"].max()),
            "simeanFm": float(res["dynamic"].mean()), "siadpFm": float(res["adaptive"])}


def reference_size_invariance(pairs, quiet: bool = True) -> dict[str, float]:
    """``SizeInvarianceMAE`` and ``SizeInvarianceFmeasureV2`` with a sample-based
    ``FmeasureHandler(beta=0.3)``, reduced as PySODMetrics' tests do (per image the mean over
    targets of each target curve's max / mean, then the mean over images)."""
    mae = psm.SizeInvarianceMAE()
    fm = psm.SizeInvarianceFmeasureV2(
        {"fm": psm.FmeasureHandler(with_dynamic=True, with_adaptive=True, beta=0.3)})
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")  # 0 / 0 where the boxes cover the image
        for pred, gt in pairs:
            mae.step(pred, gt)
            fm.step(pred, gt)
    res = fm.get_results()["fm"]
    return {"siMAE": float(mae.get_results()["si_mae"]),
            "simaxFm": float(np.asarray([s.max(axis=-1).mean() for s in res["dynamic"]]).mean()),
            "simeanFm": float(np.asarray([s.mean(axis=-1).mean()
                                          for s in res["dynamic"]]).mean()),
            "siadpFm": float(res["adaptive"])}


def reference_msiou(pairs) -> dict[str, float]:
    """``MSIoU(with_dynamic=True, with_adaptive=True)``: max and mean of the averaged curve and
    the adaptive value."""
    msiou = psm.MSIoU(with_dynamic=True, with_adaptive=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy 2's trapz deprecation
        for pred, gt in pairs:
            msiou.step(pred, gt)
        res = msiou.get_results()
    return {"maxMSIoU": float(res["dynamic"].max()), "meanMSIoU": float(res["dynamic"].mean()),
            "adpMSIoU": float(res["adaptive"])}


def _birefnet_band(mask: np.ndarray) -> np.ndarray:
    """BiRefNet's ``mask_to_boundary``: the map minus its erosion, padded by a zero pixel."""
    h, w = mask.shape
    dilation = max(1, int(round(0.02 * np.sqrt(h ** 2 + w ** 2))))
    padded = cv2.copyMakeBorder(mask, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    eroded = cv2.erode(padded, np.ones((3, 3), np.uint8), iterations=dilation)
    return mask - eroded[1:h + 1, 1:w + 1]


def birefnet_biou(pairs) -> dict[str, float]:
    """BiRefNet's BIoUMeasure: per image an IoU curve of the boundary bands over 256
    thresholds, averaged over images; the max and mean of that curve."""
    curves = []
    for pred, gt in pairs:
        p, g = birefnet_normalise(pred, gt)
        p_band = _birefnet_band((p * 255).astype(np.uint8))
        g_band = _birefnet_band((g * 255).astype(np.uint8)) > 128
        bins = np.linspace(0, 256, 257)
        tp = np.cumsum(np.flip(np.histogram(p_band[g_band], bins=bins)[0]))
        fp = np.cumsum(np.flip(np.histogram(p_band[~g_band], bins=bins)[0]))
        curves.append(tp / (max(np.count_nonzero(g_band), 1) + fp))
    curve = np.mean(np.array(curves, dtype=np.float64), axis=0)
    return {"maxBIoU": float(curve.max()), "meanBIoU": float(curve.mean())}


def birefnet_mba(pairs) -> float:
    """BiRefNet's MBAMeasure: per image the accuracy of ``pred > 128`` in the GT's
    morphological gradient with five disks, averaged; then the mean over images."""
    values = []
    for pred, gt in pairs:
        p, g = (pred > 128).astype(np.uint8), (gt > 128).astype(np.uint8)
        h, w = g.shape
        accs = []
        for i in range(5):
            r = 1 + int(((w + h) / 300 - 1) / 5 * i)
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (r * 2 + 1, r * 2 + 1))
            region = cv2.morphologyEx(g, cv2.MORPH_GRADIENT, kernel) > 0
            gi, pi = g[region], p[region]
            with np.errstate(invalid="ignore"):
                accs.append((gi * pi + (1 - gi) * (1 - pi)).sum() / region.sum())
        values.append(sum(accs) / 5)
    return float(np.mean(np.array(values, np.float64)))


def reference_cm(pairs) -> float:
    """PySODMetrics' ``ContextMeasure()``: the mean of its per-image scores."""
    cm = psm.ContextMeasure()
    for pred, gt in pairs:
        cm.step(pred, gt)
    return float(cm.get_results()["cm"])


def reference_ccm(triples) -> float:
    """PySODMetrics' ``CamouflageContextMeasure()`` on (pred, gt, RGB image) triples."""
    ccm = psm.CamouflageContextMeasure()
    for pred, gt, image in triples:
        ccm.step(pred, gt, img=image)
    return float(ccm.get_results()["ccm"])


def camouflaged_image(gt: np.ndarray, seed: int) -> np.ndarray:
    """An RGB image whose object is a slightly shifted copy of a textured background."""
    rng = np.random.default_rng(seed)
    h, w = gt.shape
    texture = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 2)
    shifted = np.roll(texture, (3, 5), axis=(0, 1)).astype(np.int16) + rng.integers(-12, 13, 3)
    inside = (gt > 128)[:, :, None]
    return np.where(inside, np.clip(shifted, 0, 255), texture).astype(np.uint8)
