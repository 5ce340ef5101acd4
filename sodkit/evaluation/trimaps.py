"""``sodkit eval --trimaps``: each dataset's trimaps, for the matting family's metrics over the
unknown region. Matched to the GTs by stem, every one found before anything is measured (each
is checked against its GT when it is read)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError

if TYPE_CHECKING:
    from .job import Job
    from .request import EvalRequest

logger = logging.getLogger(__name__)


def assign_trimaps(request: EvalRequest, jobs: list[Job], families: tuple[str, ...],
                   split) -> None:
    """Give each job the trimap file of every GT stem (``job.trimaps``) where ``--trimaps``
    names its folder; a job without one is measured over the whole image.

    Args:
        split: ``plan.split_spec`` (``[NAME=]DIR``).
    """
    from ..trimap import match_trimaps

    if not request.trimaps:
        return
    if "matting" not in families:
        logger.warning("--trimaps is read only by --compute matting; ignored")
        return
    if request.groups:
        raise UserError("--trimaps are matched to the GTs by flat stem; they do not go with "
                        "--groups")
    folders: dict[str | None, Path] = {}
    for spec in request.trimaps:
        name, folder = split(spec, "trimaps")
        folders[name] = folder
    names = {job.name for job in jobs}
    unknown = [name for name in folders if name is not None and name not in names]
    if unknown:
        raise UserError(f"--trimaps {unknown[0]}=...: no dataset of that name "
                        f"(datasets: {', '.join(sorted(names))})")
    if None in folders and len(jobs) > 1:
        raise UserError("with several datasets, name the trimaps' one: --trimaps NAME=DIR")
    for job in jobs:
        folder = folders.get(job.name, folders.get(None))
        if folder is not None:
            job.trimaps = match_trimaps(folder, sorted(job.gts), "--trimaps")
