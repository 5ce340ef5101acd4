"""Optional metric families: the field's other metrics, each per image, mergeable like the rest.

The standard set (MAE, S, E, wF, F and FmeasureV2's family) comes from histograms; the
metrics here need the masks themselves (skeletons, contours, connected components, boundary
bands), so each image is measured once into a small fixed-size float64 row, and the dataset's
numbers are computed from the rows, taken in dataset-index order, exactly as the rest. Rows of
any shards or processes concatenate, so distributed evaluation gives the single-pass bits.

A family is selected by name (``SODMetrics(families=...)``, ``sodkit eval --compute``,
``eval.compute``); none is computed by default: the default stays the standard set, whose
cost they would multiply (see the README's metric table for the costs and references).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..errors import ConfigError, UserError
from ..registry import Registry
from . import temporal


class MissingPackage(UserError, ValueError):
    """A selected family's optional package is not installed (the CLI prints one line)."""


class Pair:
    """One uint8 (prediction, GT) pair and the derived maps several families share."""

    def __init__(self, pred: np.ndarray, gt: np.ndarray, image: np.ndarray | None = None,
                 trimap: np.ndarray | None = None) -> None:
        self.pred = pred
        self.gt = gt
        self.image = image  # RGB uint8 (H, W, 3), for the families that read it
        self.trimap = trimap  # uint8 0 / 128 / 255 (H, W), for the matting family

    @cached_property
    def fg(self) -> np.ndarray:
        """The binary GT, ``gt > 128`` (every reference's binarisation)."""
        return self.gt > 128

    @cached_property
    def norm(self) -> np.ndarray:
        """The prediction in [0, 1] as PySODMetrics and BiRefNet normalise it: ``pred / 255``,
        then min-max scaled unless constant (same float64 operations, hence the same bits)."""
        p = self.pred / 255
        low, high = p.min(), p.max()
        return (p - low) / (high - low) if high != low else p

    @cached_property
    def levels(self) -> np.ndarray:
        """``uint8(255 * norm)`` (truncated): the 0..255 bins the references' curves use."""
        return (self.norm * 255).astype(np.uint8)


@dataclass(frozen=True)
class Family:
    """A selectable metric family.

    Attributes:
        name: its selection name.
        keys: the result keys it adds to ``SODMetrics.compute()``.
        width: float64 values per image row.
        measure: one image's row.
        summarize: (N, width) rows in dataset-index order -> ``{key: value}``.
        reference: what it equals (documentation).
        needs: optional packages the family imports (checked when it is selected).
        reads_image: whether it needs each pair's RGB image as well.
        lower_is_better: its keys that are errors (smaller is better: tables rank them so and
            ``eval.metric`` keeps the checkpoint with the smallest); the others are scores.
        per_image: (N, width) rows -> each image's own values (``results_per_image.csv``);
            default: the columns under ``keys`` (a row that is one value per key).
        sequence: measured over the consecutive frames of each video, not per pair: its
            ``measure`` leaves a placeholder row that ``sodkit eval --groups`` fills
            (:mod:`sodkit.evaluation.temporal`); selected only there, and not by ``all``.
    """

    name: str
    keys: tuple[str, ...]
    width: int
    measure: Callable[[Pair], np.ndarray]
    summarize: Callable[[np.ndarray], dict[str, float]]
    reference: str
    needs: tuple[str, ...] = ()
    reads_image: bool = False
    lower_is_better: tuple[str, ...] = ()
    per_image: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None
    sequence: bool = False

    def image_values(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Each image's own values of this family's keys, from its rows (index order)."""
        if self.per_image is not None:
            return self.per_image(rows)
        return {key: rows[:, i].copy() for i, key in enumerate(self.keys)}


def curve_values(high: str, mean: str, length: int, adaptive: str | None = None
                 ) -> Callable[[np.ndarray], dict[str, np.ndarray]]:
    """Per image, max and mean of the image's own curve (its first ``length`` values) and the
    adaptive value after it: as per-image maxFm, not the dataset's max of the mean curve."""
    def values(rows: np.ndarray) -> dict[str, np.ndarray]:
        curves = rows[:, :length]
        out = {high: curves.max(axis=1), mean: curves.mean(axis=1)}
        return out if adaptive is None else {**out, adaptive: rows[:, length].copy()}
    return values


def column_means(*keys: str) -> Callable[[np.ndarray], dict[str, float]]:
    """A summary that averages each column over images (``np.mean`` of the column, as the
    references' ``np.mean(np.array(values))``: the same pairwise sum, the same bits)."""
    def summarize(rows: np.ndarray) -> dict[str, float]:
        return {key: float(np.mean(np.ascontiguousarray(rows[:, i])))
                for i, key in enumerate(keys)}
    return summarize


def _mse(pair: Pair) -> np.ndarray:
    """BiRefNet's ``MSEMeasure``: the mean squared error of the normalised prediction."""
    return np.array([np.mean((pair.norm - pair.fg) ** 2)])


def _hce(pair: Pair) -> np.ndarray:
    from .hce import hce

    return np.array([hce(pair.norm > 0.5, pair.fg)], np.float64)


def _size_invariance(pair: Pair) -> np.ndarray:
    from .size_invariance import si_fmeasure, si_mae, targets

    boxes = targets(pair.fg)
    return np.array([si_mae(pair.norm, pair.fg, boxes),
                     *si_fmeasure(pair.norm, pair.levels, pair.fg, boxes)])


SI_KEYS = ("siMAE", "simaxFm", "simeanFm", "siadpFm")
MATTING_KEYS = ("SAD", "MattingMSE", "MAD", "Grad", "Conn")  # metrics/matting.py KEYS


def _msiou(pair: Pair) -> np.ndarray:
    from .msiou import msiou

    return msiou(pair.norm, pair.levels, pair.fg)


def _summarize_msiou(rows: np.ndarray) -> dict[str, float]:
    """max / mean of the curve averaged over images (257 thresholds), mean adaptive value."""
    curve = np.mean(np.ascontiguousarray(rows[:, :257]), axis=0)
    return {"maxMSIoU": float(curve.max()), "meanMSIoU": float(curve.mean()),
            "adpMSIoU": float(np.mean(np.ascontiguousarray(rows[:, 257])))}


def _biou(pair: Pair) -> np.ndarray:
    from .boundary import boundary_iou_curve

    return boundary_iou_curve(pair.levels, pair.fg)


def _summarize_biou(rows: np.ndarray) -> dict[str, float]:
    curve = np.mean(rows, axis=0)  # BiRefNet: the mean of the (N, 256) curves over images
    return {"maxBIoU": float(curve.max()), "meanBIoU": float(curve.mean())}


def _mba(pair: Pair) -> np.ndarray:
    from .boundary import boundary_accuracy

    return np.array([boundary_accuracy(pair.pred, pair.gt)])


def _cm(pair: Pair) -> np.ndarray:
    from .context import context_measure

    return np.array([context_measure(pair.norm, pair.fg)])


def _ccm(pair: Pair) -> np.ndarray:
    from .camouflage import camouflage_context_measure

    if pair.image is None:
        raise ValueError("metric family CCM needs each pair's image: update(pred, gt, "
                         "image=rgb)")
    return np.array([camouflage_context_measure(pair.norm, pair.fg, pair.image)])


def _matting(pair: Pair) -> np.ndarray:
    from .matting import matting_errors

    return matting_errors(pair.pred, pair.gt, pair.trimap)


def _registry() -> dict[str, Family]:
    families = [
        Family("MSE", ("MSE",), 1, _mse, column_means("MSE"),
               "BiRefNet evaluation/metrics.py MSEMeasure", lower_is_better=("MSE",)),
        Family("HCE", ("HCE",), 1, _hce, column_means("HCE"),
               "PySODMetrics HumanCorrectionEffortMeasure", needs=("skimage",),
               lower_is_better=("HCE",)),
        Family("SI", SI_KEYS, 4, _size_invariance, column_means(*SI_KEYS),
               "PySODMetrics SizeInvarianceMAE, SizeInvarianceFmeasureV2",
               lower_is_better=("siMAE",)),
        Family("MSIoU", ("maxMSIoU", "meanMSIoU", "adpMSIoU"), 258, _msiou, _summarize_msiou,
               "PySODMetrics MSIoU(with_dynamic=True, with_adaptive=True)",
               per_image=curve_values("maxMSIoU", "meanMSIoU", 257, "adpMSIoU")),
        Family("BIoU", ("maxBIoU", "meanBIoU"), 256, _biou, _summarize_biou,
               "BiRefNet evaluation/metrics.py BIoUMeasure",
               per_image=curve_values("maxBIoU", "meanBIoU", 256)),
        Family("mBA", ("mBA",), 1, _mba, column_means("mBA"),
               "BiRefNet evaluation/metrics.py MBAMeasure"),
        Family("CM", ("CM",), 1, _cm, column_means("CM"), "PySODMetrics ContextMeasure"),
        Family("CCM", ("CCM",), 1, _ccm, column_means("CCM"),
               "PySODMetrics CamouflageContextMeasure", needs=("skimage", "sklearn"),
               reads_image=True),
        Family("matting", MATTING_KEYS, 5, _matting, column_means(*MATTING_KEYS),
               "mmagic 1.2.0 SAD, MattingMSE, GradientError, ConnectivityError (Adobe's Deep "
               "Image Matting evaluate.m); MAD: P3M-10k's", lower_is_better=MATTING_KEYS),
        Family("Flicker", ("Flicker",), temporal.WIDTH, temporal.placeholder,
               temporal.summarize, "sodkit: mean |P_t - P_{t-1}| where the GT holds still "
               "(sodkit.metrics.temporal)", lower_is_better=("Flicker",),
               per_image=temporal.per_frame, sequence=True),
    ]
    registry: Registry[Family] = Registry("metric family")
    for family in families:  # registration order: the order of keys in results and tables
        registry.add(family.name, family)
    return registry


FAMILIES: Registry[Family] = _registry()


def family_keys(names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The result keys of the named families (default: every family), in registry order."""
    chosen = set(FAMILIES if names is None else names)
    return tuple(key for name, family in FAMILIES.items() if name in chosen
                 for key in family.keys)


def resolve(names: Iterable[str] | str | None, images: bool = False) -> tuple[str, ...]:
    """Family names in registry order from a selection: names (case-insensitive), ``"all"``
    (every family computed from each pair's masks alone, and with ``images`` (the images are
    given: ``eval --images``) those that read them too, CCM; without, CCM is added by name; a
    family of frame sequences, Flicker, only by name), or a comma-separated text of either;
    None or empty: none.

    Raises:
        ConfigError (a ValueError): naming an unknown family and the known ones.
    """
    if names is None:
        return ()
    if isinstance(names, str):
        names = [part for part in names.split(",")]
    wanted = [name.strip() for name in names if name.strip()]
    if any(name.lower() == "all" for name in wanted):  # those of the masks alone: CCM is named
        wanted = [n for n in wanted if n.lower() != "all"] + [
            name for name, family in FAMILIES.items()
            if (images or not family.reads_image) and not family.sequence]
    by_lower = {name.lower(): name for name in FAMILIES}
    unknown = [name for name in wanted if name.lower() not in by_lower]
    if unknown:
        raise ConfigError(f"unknown metric famil{'ies' if len(unknown) > 1 else 'y'} "
                          f"{', '.join(unknown)}; choose from {', '.join(FAMILIES)} or all")
    chosen = {by_lower[name.lower()] for name in wanted}
    for name in chosen:
        _check_installed(FAMILIES[name])
    return tuple(name for name in FAMILIES if name in chosen)


def _check_installed(family: Family) -> None:
    """Refuse a family whose optional package is missing, before any image is measured."""
    import importlib.util

    names = {"skimage": "scikit-image", "sklearn": "scikit-learn"}
    missing = [names.get(m, m) for m in family.needs if importlib.util.find_spec(m) is None]
    if missing:
        from ..extras import install_hint

        raise MissingPackage(f"metric family {family.name} needs {' and '.join(missing)}, "
                             f"which {'is' if len(missing) == 1 else 'are'} not installed: "
                             f"{install_hint('metrics')}")


def sequences(names: Iterable[str]) -> tuple[str, ...]:
    """The named families measured over frame sequences (:attr:`Family.sequence`)."""
    return tuple(name for name in names if FAMILIES[name].sequence)


def reads_images(names: Iterable[str]) -> bool:
    """Whether any of the named families needs the images."""
    return any(FAMILIES[name].reads_image for name in names)


def measure_families(names: Sequence[str], pairs: Iterable[tuple[np.ndarray, np.ndarray]],
                     count: int, images: Sequence[np.ndarray | None] | None = None,
                     trimaps: Sequence[np.ndarray | None] | None = None
                     ) -> dict[str, np.ndarray]:
    """Each named family's (count, width) rows for ``count`` uint8 (pred, gt) pairs (and
    their RGB images, for the families that read them; their trimaps, for the matting family:
    None measures the whole image)."""
    rows = {name: np.empty((count, FAMILIES[name].width)) for name in names}
    if not names:
        return rows
    for i, (pred, gt) in enumerate(pairs):
        pair = Pair(np.asarray(pred), np.asarray(gt), None if images is None else images[i],
                    None if trimaps is None else trimaps[i])
        for name in names:
            rows[name][i] = FAMILIES[name].measure(pair)
    return rows


def per_image_families(extra: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every computed family's per-image values (keys in registry order), from its rows."""
    out: dict[str, np.ndarray] = {}
    for name in FAMILIES:
        if name in extra:
            out.update(FAMILIES[name].image_values(extra[name]))
    return out


def summarize_families(extra: dict[str, np.ndarray]) -> dict[str, float]:
    """Every family's dataset-level numbers from its rows (already in dataset-index order)."""
    out: dict[str, float] = {}
    for name in FAMILIES:
        if name in extra:
            out.update(FAMILIES[name].summarize(extra[name]))
    return out
