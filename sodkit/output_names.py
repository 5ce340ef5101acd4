"""The names of the files sodkit writes beside a dataset's folder; a dataset may not take one.

``sodkit eval --gt NAME=DIR`` writes each dataset into ``<out>/NAME/`` next to the combined
``results.*``, ``evaluation.json`` and the ``.sodkit-run`` marker, and a run writes
``predictions/<dataset>/`` (a folder that sodkit may mark as its own). A dataset named
``results.json`` or ``.sodkit-run`` made a folder where a file belongs: a traceback at the end of
the work, or a marker that is a folder. Such a name is refused with the key that holds it,
before any work. Names are compared without case: on macOS and Windows ``Results.JSON`` is the
same file.
"""

from __future__ import annotations

from .errors import UserError
from .outputs import MARKER
from .paths import check_name

OUTPUT_NAMES = (MARKER, "evaluation.json", "datasets.json", "results.json", "results.md",
                "results.csv", "results_per_image.csv", "curves.json", "pr.png", "fm.png")
_TAKEN = {name.casefold() for name in OUTPUT_NAMES}


def check_dataset_name(value: object, key: str, example: str = "ECSSD",
                       error: type[UserError] = UserError) -> str:
    """``value`` if it is a valid name (:func:`sodkit.paths.check_name`) and not one of
    :data:`OUTPUT_NAMES` (nor another ``.sodkit`` name); else ``error`` naming ``key``."""
    name = check_name(value, key, example, error)
    if name.casefold() in _TAKEN or name.casefold().startswith(".sodkit"):
        raise error(f"{key}: {name!r} is the name of a file sodkit writes beside each "
                    f"dataset's folder ({', '.join(OUTPUT_NAMES)}); give the dataset another "
                    f"name, e.g. {key}={example}")
    return name
