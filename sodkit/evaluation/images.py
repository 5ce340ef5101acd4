"""``sodkit eval --images``: the RGB images of each dataset, for the metric families that read
them (CCM). Matched to the GTs by stem, every one checked before anything is measured."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from ..text import plural

if TYPE_CHECKING:
    from .job import Job
    from .request import EvalRequest

logger = logging.getLogger(__name__)


def assign_images(request: EvalRequest, jobs: list[Job], families: tuple[str, ...],
                  split, listed) -> None:
    """Give each job the image file of every GT stem (``job.images``) when a selected family
    reads images; ``--images`` is otherwise ignored, with a warning.

    Args:
        split: ``plan.split_spec`` (``[NAME=]DIR``); listed: ``plan.listed`` (stems, shortened).
    """
    from ..metrics.families import reads_images
    from .toolkit import list_named

    namings = request.image_namings
    if not reads_images(families):
        if len(request.images) > len(namings):  # given by the user, not by --datasets
            logger.warning("--images is read only by --compute CCM; ignored")
        return
    folders: dict[str | None, Path] = {}
    for spec in request.images:
        name, folder = split(spec, "images")
        folders[name] = folder
    for job in jobs:
        named = job.name if len(request.gt) > 1 or job.name in folders else None
        folder = folders.get(named, folders.get(None) if len(jobs) == 1 else None)
        if folder is None:
            raise UserError(f"--compute CCM reads the images: give --images "
                            f"{job.name + '=' if len(jobs) > 1 else '[NAME=]'}DIR for dataset "
                            f"{job.name}")
        found = list_named(folder, *namings.get(job.name, ("", "")))
        missing = [stem for stem in job.gts if stem not in found]
        if missing:
            raise UserError(f"--images {folder}: no image for {plural(len(missing), 'GT stem')} "
                            f"of {job.name}: {listed(missing)}")
        job.images = {stem: found[stem] for stem in job.gts}
