"""One dataset of a folder evaluation: its GT files and, per method, the prediction of each GT
stem, with what is measured of them. Every step of :mod:`sodkit.evaluation` fills or reads
one."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CiOptions:
    """What ``--ci`` asked for."""

    resamples: int
    seed: int
    baseline: str | None


@dataclass
class Job:
    """One GT dataset and, per method, the prediction file of each GT stem."""

    name: str
    out_dir: Path
    gts: dict[str, Path]
    preds: dict[str, dict[str, Path]] = field(default_factory=dict)
    families: tuple[str, ...] = ()  # --compute
    images: dict[str, Path] | None = None  # --images, when a family reads them (CCM)
    trimaps: dict[str, Path] | None = None  # --trimaps, for --compute matting
    ci: CiOptions | None = None  # --ci / --baseline
    ci_result: dict[str, Any] | None = None  # what ci.json holds, once measured
    curves: tuple[str, ...] = ("pr", "fm")  # --curves: the plots written
    groups: bool = False  # --groups: stems are <group>/<stem>, metrics averaged over groups
