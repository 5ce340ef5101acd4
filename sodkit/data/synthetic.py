"""The built-in demo dataset: generated deterministically to disk, in an ordinary folder layout.

A fresh machine can run the whole train/test/predict cycle without downloading anything: the
``demo-train`` / ``demo-test`` presets call :func:`generate_demo` on first use. The data go through
exactly the code path of a real dataset (files on disk, paired by stem), so the demo also tests
the pipeline. What the images look like and why is explained in :mod:`sodkit.data.render`.

Layout under ``root``::

    DEMO-TR/images/00000.jpg ...   DEMO-TR/masks/00000.png ...
    DEMO-TE/images/00000.jpg ...   DEMO-TE/masks/00000.png ...
    .sodkit-demo.json              marker: written last, its presence means "complete"

Writing is atomic: everything goes to a temporary sibling folder that is renamed to ``root`` at
the end, so an interrupted run never leaves half a dataset and concurrent ranks cannot collide
(the loser of the rename discards its copy).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from ..errors import DataError
from ..imageio import write_mask
from ..text import plural
from .render import render_sample

logger = logging.getLogger(__name__)

DEMO_VERSION = 1  # bump whenever the generator's output changes (the cache folder follows it)
TRAIN_DIR = "DEMO-TR"
TEST_DIR = "DEMO-TE"
MARKER = ".sodkit-demo.json"
JPEG_QUALITY = 92
_SPLIT_IDS = {TRAIN_DIR: 0, TEST_DIR: 1}


def generate_demo(root: str | Path, n_train: int = 800, n_test: int = 150, seed: int = 0) -> None:
    """Make sure the demo dataset exists under ``root``; generate it (15-20 s on 2 cores) if not.

    A complete dataset (marker present) is reused as is; when it was made with other arguments, a
    warning says so instead of silently regenerating what a user may be training on.
    """
    root = Path(root).expanduser()
    params = {"version": DEMO_VERSION, "n_train": n_train, "n_test": n_test, "seed": seed}
    if _reuse(root, params):
        return
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise DataError(f"{root} exists but is not a complete sodkit demo dataset (no {MARKER}); "
                        "delete it or point the demo dataset's root elsewhere")
    root.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the published dataset should not be
        for split, count in ((TRAIN_DIR, n_train), (TEST_DIR, n_test)):
            write_split(tmp / split, count, seed, _SPLIT_IDS[split])
        (tmp / MARKER).write_text(json.dumps(params, indent=2) + "\n")
        _publish(tmp, root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    logger.info("generated the demo dataset (%d train, %s) in %s in %.1f s",
                n_train, plural(n_test, "test image"), root, time.perf_counter() - start)


def write_split(folder: Path, count: int, seed: int, split_id: int) -> None:
    """Write ``count`` samples as ``images/<i>.jpg`` and ``masks/<i>.png``.

    Sample ``i`` uses its own generator seeded by (seed, split_id, i): the output depends neither
    on the order nor on how many samples are written before it.
    """
    (folder / "images").mkdir(parents=True)
    (folder / "masks").mkdir(parents=True)
    for i in range(count):
        image, mask = render_sample(np.random.default_rng([seed, split_id, i]))
        stem = f"{i:05d}"
        ok, buf = cv2.imencode(".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR),
                               [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
        if not ok:
            raise OSError(f"cannot encode JPEG for sample {stem}")
        buf.tofile(str(folder / "images" / f"{stem}.jpg"))
        write_mask(folder / "masks" / f"{stem}.png", mask)


def _reuse(root: Path, params: dict) -> bool:
    marker = root / MARKER
    if not marker.is_file():
        return False
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError):
        found = None
    if found != params:
        logger.warning("reusing the demo dataset in %s made with %s (asked for %s); delete the "
                       "folder to regenerate it", root, found, params)
    else:
        logger.debug("reusing the demo dataset in %s", root)
    return True


def _publish(tmp: Path, root: Path) -> None:
    """Rename the finished temporary folder to ``root``; if another process won, keep its copy."""
    try:
        if root.is_dir() and not any(root.iterdir()):
            root.rmdir()  # an empty folder the user made: replace it
        os.rename(tmp, root)
    except OSError as exc:
        if (root / MARKER).is_file():
            logger.info("another process generated the demo dataset in %s first", root)
            return
        raise DataError(f"cannot move the generated demo dataset to {root}: {exc}") from exc
