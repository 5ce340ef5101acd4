"""How a mask file encodes the object, decided from its pixels: the one place that decides, for
training, evaluation, ``sodkit eval`` and ``sodkit check-data`` alike.

A SOD mask is grey, object bright (255) on a dark background (0), soft edges in between, and
is binarised with ``> 128``. Other encodings are common in the wild and would binarise to an
empty mask (F-measure 0, no error):

- a 0/1 label map (8- or 16-bit grey whose largest value is 1): read as 0/255;
- a 16-bit mask holding 0..255 (its largest value <= 255, where a real 16-bit mask spans up
  to 65535): its values are read as 8-bit values, not reduced to their high byte;
- a single colour on black (a red object: grey would make it 76): read by its brightest
  channel, scaled so that the colour itself is 255;
- a palette label map (VOC: class colours, 255 the "void" border): every non-black colour is
  object (255);
- a colour image of several colours that is no palette (a heat map, class colours saved as RGB)
  has no reading that is surely right: it is refused, naming the cause.

Grey masks, 16-bit masks, and colour files whose channels agree (grey saved as RGB, a tinted
map, a JPEG's chroma noise) read exactly as ``cv2.imread(p, cv2.IMREAD_GRAYSCALE)`` reads them
(PySODEvalToolkit's and PySODMetrics' reader; the arithmetic is in ``sodkit/grey.py``). The
checks cost one ``max`` of an 8-bit grey mask (the fast path of ``sodkit eval``); colour files
pay a few more array passes.

Each converted file is counted per folder and kind (:func:`take_notes`) so that a command says
it once per folder, whatever process read the file: worker processes return their counts.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .errors import DataError
from .grey import to_uint8
from .text import noun_for, plural

LABELS = "0/1 label maps: read as 0/255"
WIDE = "16-bit masks holding 0..255: read as 8-bit values"
COLOUR = "single-colour masks on black: read by their brightest channel (the colour = 255)"
PALETTE = "palette label maps (class colours, e.g. VOC): every non-black colour read as object"

GREY_SPREAD = 64  # channels that differ by less (JPEG chroma noise) are grey
HUE_TOLERANCE = 48  # a single-colour mask's pixels are multiples of its colour within this



class MaskEncodingError(DataError):
    """A mask whose encoding has no sure reading (the file itself decodes)."""


logger = logging.getLogger(__name__)

_notes: Counter[tuple[str, str]] = Counter()  # (folder, kind) -> files converted
_lock = threading.Lock()


def decode_mask(raw: np.ndarray, palette: bool, path: str | Path,
                grey: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Decoded pixels (any depth, 1-4 channels, BGR order) -> uint8 grey (H, W), object bright.

    ``palette``: the file stores palette indices (PNG colour type 3, GIF). ``grey``: what
    ``cv2.imread(p, IMREAD_GRAYSCALE)`` gives for the file, asked only of a colour file whose
    channels agree (default: libpng's arithmetic on ``raw``, as for a PNG). A conversion is
    counted under the file's folder; an encoding with no sure reading is a ``DataError``.
    """
    from .grey import png_grey

    kinds = []
    if raw.dtype == np.uint16 and 0 < raw.max() <= 255:
        raw, grey = raw.astype(np.uint8), None  # its 8-bit values, not the file's high bytes
        kinds.append(WIDE)
    array = to_uint8(raw)
    if array.ndim == 3:
        array = array[:, :, 0] if array.shape[2] == 1 else array[:, :, :3]
    if array.ndim == 3:
        array, kind = _colour(array, palette, path, grey or (lambda: png_grey(raw)))
        kinds += [kind] if kind else []
    if kinds in ([], [WIDE]) and array.max() == 1:  # an empty mask (max 0) stays empty
        array = array * np.uint8(255)
        kinds = ["16-bit " + LABELS if kinds else LABELS]
    if kinds:
        _note(path, "; ".join(kinds))
    return np.ascontiguousarray(array)


def _colour(bgr: np.ndarray, palette: bool, path: str | Path,
            grey: Callable[[], np.ndarray]) -> tuple[np.ndarray, str]:
    """A colour mask's grey reading and its kind ("" for grey stored as colour)."""
    bright = bgr.max(axis=2)
    if int((bright - bgr.min(axis=2)).max()) < GREY_SPREAD:
        return grey(), ""
    colour = bgr.reshape(-1, 3)[int(bright.argmax())].astype(np.float32)
    peak = float(colour.max())
    expected = bright[:, :, None].astype(np.float32) * (colour / peak)
    if float(np.abs(bgr - expected).max()) <= HUE_TOLERANCE:
        scaled = np.minimum(bright.astype(np.float32) * (255.0 / peak) + 0.5, 255)
        return scaled.astype(np.uint8), COLOUR
    if palette:
        return np.where(bright > 0, np.uint8(255), np.uint8(0)), PALETTE
    raise MaskEncodingError(f"{path} is a colour mask of several colours (class colours or a "
                            f"heat map?) with no sure reading as a saliency mask; save it as "
                            f"grey, object white (or as a 0/1 label map)")


def _note(path: str | Path, kind: str) -> None:
    with _lock:
        _notes[(str(Path(path).parent), kind)] += 1


def take_notes() -> Counter[tuple[str, str]]:
    """The conversions counted in this process since the last call: ``(folder, kind) -> files``."""
    global _notes
    with _lock:
        taken, _notes = _notes, Counter()
    return taken


def add_notes(counts: Counter[tuple[str, str]]) -> None:
    """Fold in the counts a worker process returned."""
    with _lock:
        _notes.update(counts)


def log_notes(label: str) -> None:
    """Log, once per folder and kind, the conversions counted since :func:`take_notes` was last
    called: ``LABEL: FOLDER: 37 masks are 0/1 label maps: read as 0/255``."""
    for (folder, kind), count in sorted(take_notes().items()):
        logger.warning("%s: %s: %s %s %s", label, folder, plural(count, "mask"),
                       noun_for(count, "is"), kind)
