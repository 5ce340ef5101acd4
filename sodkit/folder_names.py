"""A dataset's name from its folder, when the user gave none (#28).

GT and root folders often have names that say what they hold, not which dataset: ``masks``,
``GT``, ``Test``, or ``DUTS-TE-Mask`` inside ``DUTS-TE``. Such a folder is named after the
nearest folder above it whose name is not one of those, so that ``sodkit eval --gt
data/ECSSD/Mask`` and a preset pointed at ``root: data/MY-TE/test`` show ``ECSSD`` and
``MY-TE`` in every table. No torch here: ``sodkit eval`` and ``report`` import it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# what a folder of images or masks is often called, whatever the dataset (compared lower-case)
GENERIC = frozenset({
    "mask", "masks", "gt", "gts", "gt_object", "gt_mask", "gt_masks", "groundtruth",
    "ground_truth", "ground-truth", "ground_truth_mask", "groundtruthmask", "label", "labels",
    "annotation", "annotations", "saliency", "saliency_maps", "segmentation", "image", "images",
    "img", "imgs", "test", "testset", "test_set", "testing", "train", "trainset", "training",
    "val", "valid", "validation", "data", "dataset",
})
_SEPARATORS = re.compile(r"^[-_ .]+")


def is_generic(name: str, parent: str = "") -> bool:
    """Whether ``name`` says what a folder holds rather than which dataset: one of
    :data:`GENERIC`, or the parent's name followed by one (``DUTS-TE-Mask`` in ``DUTS-TE``)."""
    lowered = name.lower()
    if parent and lowered.startswith(parent.lower()) and len(lowered) > len(parent):
        lowered = _SEPARATORS.sub("", lowered[len(parent):])
    return lowered in GENERIC


def dataset_name(folder: str | Path, levels: int = 3) -> str:
    """The folder's own name, or when it is generic, that of the nearest folder above (at most
    ``levels`` up) whose name is not; the folder's own name when all of them are."""
    path = Path(os.path.abspath(folder))  # as the user named it: a link keeps its own name
    current = path
    for _ in range(levels):
        parent = current.parent
        if not current.name or not is_generic(current.name, parent.name):
            break
        if not parent.name or parent == current:
            return path.name
        current = parent
    return current.name if current.name and not is_generic(current.name) else path.name
