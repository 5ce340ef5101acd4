"""``sodkit eval --groups``: video and co-salient datasets, evaluated per group and averaged over
groups (#25), as PySODEvalToolkit's ``--data-type video`` (its ``GroupedMetricRecorder``).

The GT folder holds one sub-folder per video or group, and each method's folder the same
sub-folders. Every frame is one image of the dataset, keyed ``<group>/<stem>`` (groups are then
contiguous in the sorted stems) and measured like any other, so worker processes, torchrun
shards and ``--allow-missing`` work unchanged. Only the numbers differ: each group's metrics are
computed from its own records, and the dataset's are their average over groups: a metric of
one image set (MAE, S, wF, the adaptive ones, the families') is the mean of the groups' values;
a curve is the mean of the groups' curves, and its max and mean are taken on that mean curve
(as PySODEvalToolkit recomputes ``max``/``avg`` from the averaged sequence).

``--frames START:END`` keeps a slice of each group's frames, ordered by the number their names
end with (``1:-1`` skips the first and the last, PySODEvalToolkit's ``--valid-frame-start 1
--valid-frame-end -1``); predictions of the frames left out are not reported as extra.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError, UserError

if TYPE_CHECKING:
    from ..metrics import SODMetrics
    from .methods import Naming
    from .request import EvalRequest

SEPARATOR = "/"  # between group and stem in a frame's key (never in a file name)
_TAIL = re.compile(r"(\d+)$")


def check_group_options(request: EvalRequest, families: tuple[str, ...]) -> None:
    """``--groups`` with what it works with: ``--frames`` and the families of frame sequences
    (Flicker) need it; ``--list`` and the families that read images (CCM, whose images are
    found by flat stems) do not go with it."""
    from ..metrics.families import reads_images, sequences

    if sequences(families) and not request.groups:
        raise UserError(f"--compute {sequences(families)[0]} measures consecutive frames of "
                        f"each video: give --groups (a sub-folder of frames per video)")

    if request.frames and not request.groups:
        raise UserError("--frames selects the frames of each group: give --groups as well")
    if request.groups and request.stem_list:
        raise UserError("--list selects images of flat GT folders; with --groups, --frames")
    if request.groups and reads_images(families):
        raise UserError("--compute CCM reads images by flat stem; it does not go with --groups")


def _frame_order(stem: str) -> tuple[int, str]:
    match = _TAIL.search(stem)
    return (int(match.group(1)) if match else -1, stem)


def list_groups(folder: Path, frames: slice | None) -> tuple[dict[str, Path], dict[str, set[str]]]:
    """``{"<group>/<stem>": GT file}`` of the kept frames, and every stem of each group.

    Raises:
        DataError: the folder has no sub-folder, or no group keeps a frame.
    """
    from ..imageio import list_images

    if not folder.is_dir():
        raise DataError(f"folder not found: {folder}")
    groups = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not groups:
        raise DataError(f"--groups: {folder} holds no sub-folder (one per video or group)")
    files: dict[str, Path] = {}
    every: dict[str, set[str]] = {}
    for group in groups:
        found = list_images(group)
        every[group.name] = set(found)
        kept = sorted(found, key=_frame_order)[frames or slice(None)]
        files.update({f"{group.name}{SEPARATOR}{stem}": found[stem] for stem in kept})
    if not files:
        raise DataError(f"--groups: no frame in the sub-folders of {folder}"
                        + (" within --frames" if frames else ""))
    return files, every


def group_matcher(every: dict[str, set[str]]) -> Callable[..., tuple[dict[str, Path], list[str]]]:
    """A ``match_files`` for grouped keys: each group's predictions in the method's sub-folder
    of that name; files of frames cut by ``--frames`` are neither matched nor extra."""
    from .methods import Naming, match_files

    def match(naming: Naming, stems: set[str], method: str) -> tuple[dict[str, Path], list[str]]:
        wanted: dict[str, set[str]] = {}
        for key in stems:
            group, stem = key.split(SEPARATOR, 1)
            wanted.setdefault(group, set()).add(stem)
        found: dict[str, Path] = {}
        extra: list[str] = []
        for group, keep in sorted(wanted.items()):
            folder = naming.folder / group
            if not folder.is_dir():
                continue  # every frame of the group is missing
            got, more = match_files(Naming(folder, naming.prefix, naming.suffix),
                                    every[group], method)
            found.update({f"{group}{SEPARATOR}{s}": p for s, p in got.items() if s in keep})
            extra += [f"{group}{SEPARATOR}{name}" for name in more]
        return found, extra

    return match


def _subset(state: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    return {**state, "index": state["index"][rows], "hist": state["hist"][rows],
            "adaptive": state["adaptive"][rows], "scalars": state["scalars"][rows],
            "extra": {k: v[rows] for k, v in state["extra"].items()}}


def _curve_of(key: str) -> str | None:
    """The curve a ``max...`` / ``mean...`` key is taken on (None: a metric of its own)."""
    from ..metrics.curves import BINARY_METRICS

    for mode in ("max", "mean"):
        if key.startswith(mode):
            stem = key[len(mode):]
            if stem in ("Fm", "Em"):
                return f"{stem.lower()}_curve"
            if stem in BINARY_METRICS:
                return f"{BINARY_METRICS[stem]}_curve"
    return None


def average_groups(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The dataset's result from its groups' ``SODMetrics.compute()`` results (module doc)."""
    from ..metrics.families import FAMILIES, family_keys, sequences

    sequence_keys = family_keys(sequences(FAMILIES))
    out: dict[str, Any] = {}
    curves = {key: np.mean([r[key] for r in results], axis=0)
              for key in results[0] if key.endswith("_curve")}
    for key in results[0]:
        if key.endswith("_curve"):
            out[key] = curves[key]
            continue
        curve = _curve_of(key)
        if curve in curves:
            out[key] = float(curves[curve].max() if key.startswith("max")
                             else curves[curve].mean())
        elif key in sequence_keys:  # a video of one frame has none: left out of the mean
            values = [r[key] for r in results if not np.isnan(r[key])]
            out[key] = float(np.mean(values)) if values else float("nan")
        else:
            out[key] = float(np.mean([r[key] for r in results]))
    return out


def grouped_compute(metric: SODMetrics, stems: list[str]) -> dict[str, Any]:
    """``metric``'s result averaged over the groups of ``stems`` (the sorted ``group/stem``
    keys its dataset indices refer to); groups without an image of this method are left out."""
    from ..metrics import SODMetrics

    state = metric.state_dict()
    groups = np.array([stem.split(SEPARATOR, 1)[0] for stem in stems])[state["index"]]
    results = []
    for group in dict.fromkeys(groups.tolist()):
        part = SODMetrics.from_states([_subset(state, np.flatnonzero(groups == group))])
        results.append(part.compute())
    return average_groups(results)

