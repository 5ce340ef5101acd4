"""Reading images and masks the way users expect, whatever their mode or bit depth.

OpenCV is the fastest decoder here (DESIGN.md: 1.2 ms per 320x320 pair against 2.1 ms for PIL).
``cv2.IMREAD_UNCHANGED`` keeps 16-bit data and alpha so that we decide the conversion, not the
decoder; the EXIF orientation is applied as every image viewer applies it. A file that does not
decode is a DataError that says whether it is empty, not an image at all, or truncated.

No decoder sees a file before its size on disk and the pixels its header declares are checked
against the limits (limits.py: ``SODKIT_MAX_FILE_MB``, ``SODKIT_MAX_PIXELS``). The header is
read from the PNG's IHDR, or by Pillow (which reads the EXIF orientation from it anyway) for the
other formats; a file whose header Pillow cannot read goes to OpenCV, under OpenCV's own limit
(2**30 pixels), and ends in its error.

High-resolution photos (DIS5K's reach 8K) are decoded at 1/2, 1/4 or 1/8 scale when less is
needed (:func:`read_image_reduced`): libjpeg's scaled decoding reads the whole file (a truncated
one is still found) but computes only the pixels kept, several times faster.
"""

from __future__ import annotations

import contextlib
import io
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from .errors import DataError
from .grey import to_uint8
from .limits import check_pixels, read_file
from .mask_encoding import decode_mask
from .png import decode_grey

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".gif")

_SIGNATURES = {  # leading bytes -> format, to tell a mislabelled file from a broken image
    b"\xff\xd8\xff": "JPEG", b"\x89PNG\r\n\x1a\n": "PNG", b"GIF87a": "GIF", b"GIF89a": "GIF",
    b"BM": "BMP", b"II*\x00": "TIFF", b"MM\x00*": "TIFF",
}
EXIF_ORIENTATION = 0x0112
# PNG chunks that can carry an orientation for Pillow: eXIf, a "Raw profile type exif" or
# "exif" text chunk, an XMP iTXt chunk. A PNG holding none of these names has orientation 1.
_PNG_ORIENTATION_CHUNKS = {b"eXIf", b"tEXt", b"zTXt", b"iTXt", b"?"}  # "?": no IEND found
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def sniff_format(head: bytes) -> str | None:
    """The image format that the file's first bytes announce (None: not an image we read)."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    for signature, name in _SIGNATURES.items():
        if head.startswith(signature):
            return name
    return None


def _undecodable(path: str | Path, data: np.ndarray) -> DataError:
    """The most useful description of why ``data`` did not decode."""
    if data.size == 0:
        return DataError(f"image file {path} is empty (0 bytes); replace or remove it")
    if sniff_format(data[:16].tobytes()) is None:
        return DataError(f"{path} is not an image (its content is no JPEG, PNG, BMP, TIFF, WebP "
                         f"or GIF, whatever its extension says); replace or remove it")
    return DataError(f"cannot decode image file {path}: truncated or corrupt; replace or "
                     f"remove it")


def _png_chunks(data: bytes) -> set[bytes]:
    """The chunk types of a whole PNG, read from the chunk headers (a dozen steps for a mask);
    a file that ends before IEND also lists ``b"?"``, which sends it to Pillow."""
    kinds, position = set(), len(_PNG_SIGNATURE)
    while position + 8 <= len(data):
        kind = data[position + 4: position + 8]
        kinds.add(kind)
        if kind == b"IEND":
            return kinds
        position += 12 + int.from_bytes(data[position: position + 4], "big")
    kinds.add(b"?")
    return kinds


def _png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR, None when the file has no readable IHDR first."""
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


_PILLOW_LIMIT = threading.Lock()


@contextlib.contextmanager
def _pillow(data: bytes) -> Iterator[Any]:
    """Pillow's lazy image (header read, pixels not), or None for a file it cannot identify.

    Pillow's own decompression-bomb check (a ``DecompressionBombError`` traceback above 179
    megapixels, a warning above 89) is off while it opens: sodkit checks its own limit on the
    size, so that one setting decides for every decoder.
    """
    from PIL import Image, UnidentifiedImageError

    with _PILLOW_LIMIT:
        limit, Image.MAX_IMAGE_PIXELS = Image.MAX_IMAGE_PIXELS, None
        try:
            image = Image.open(io.BytesIO(data))
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
            image = None
        finally:
            Image.MAX_IMAGE_PIXELS = limit
    if image is None:
        yield None
        return
    with image:
        yield image


def _orientation(image: Any) -> int:
    try:
        value = image.getexif().get(EXIF_ORIENTATION, 1)
    except (OSError, SyntaxError, ValueError):
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def read_header(data: bytes, source: str | Path = "the image") -> tuple[int, int, int] | None:
    """``(width, height, EXIF orientation)`` of an encoded image as stored (1-8; 1: as stored),
    None when its header cannot be read (OpenCV then names the problem).

    Pillow decodes a whole PNG to look for an ``eXIf`` chunk after the pixels (as slow as
    decoding it with OpenCV, which doubled the cost of every mask read), so a PNG without a
    chunk that could hold an orientation is answered from its chunk headers, without Pillow.

    Raises:
        DataError: the header declares more pixels than ``SODKIT_MAX_PIXELS`` (named
            ``source``), before Pillow decodes anything.
    """
    size = _png_size(data) if data.startswith(_PNG_SIGNATURE) else None
    if size is not None:
        check_pixels(source, *size)
        if _png_chunks(data).isdisjoint(_PNG_ORIENTATION_CHUNKS):
            return (*size, 1)
    with _pillow(data) as image:
        if image is None:
            return None if size is None else (*size, 1)
        check_pixels(source, *image.size)
        return (*image.size, _orientation(image))


def exif_orientation(data: bytes, source: str | Path = "the image") -> int:
    """The EXIF orientation tag (1-8; 1 = as stored) of an encoded image, 1 when it has none."""
    header = read_header(data, source)
    return 1 if header is None else header[2]


def header_size(path: str | Path) -> tuple[int, int]:
    """(height, width) as displayed (after the EXIF orientation), from the header only.

    Raises:
        DataError: the file is unreadable, empty, no image, or beyond the limits (limits.py).
    """
    data = read_file(path)
    if not data or sniff_format(data[:16]) is None:
        raise _undecodable(path, np.frombuffer(data, dtype=np.uint8))
    header = read_header(data, path)
    if header is None:
        raise DataError(f"cannot read the header of {path}: not a valid "
                        f"{sniff_format(data[:16])} file; replace or remove it")
    width, height, orientation = header
    return (width, height) if orientation >= 5 else (height, width)  # a quarter turn swaps


_ORIENT = {  # EXIF orientation -> the operations that show the image as a viewer does
    2: [lambda a: cv2.flip(a, 1)],
    3: [lambda a: cv2.rotate(a, cv2.ROTATE_180)],
    4: [lambda a: cv2.flip(a, 0)],
    5: [lambda a: cv2.transpose(a)],
    6: [lambda a: cv2.rotate(a, cv2.ROTATE_90_CLOCKWISE)],
    7: [lambda a: cv2.transpose(a), lambda a: cv2.rotate(a, cv2.ROTATE_180)],
    8: [lambda a: cv2.rotate(a, cv2.ROTATE_90_COUNTERCLOCKWISE)],
}


def _decoded(path: str | Path, encoded: bytes | None = None) -> tuple[np.ndarray, bytes, int]:
    """Decoded pixels (any depth and channel count), turned upright as an image viewer shows
    them; the file's bytes (``encoded`` when the caller read them already); the EXIF
    orientation applied.

    OpenCV's ``IMREAD_UNCHANGED`` ignores the EXIF orientation, so it is read from the header
    (Pillow, header only) and applied here: a mask drawn on the displayed photo then aligns.
    """
    if encoded is None:
        encoded = read_file(path)  # read once (non-ASCII paths work, unlike cv2.imread)
    size = _png_size(encoded) if encoded.startswith(_PNG_SIGNATURE) else None
    if size is not None:
        check_pixels(path, *size)
        array = decode_grey(encoded, path)  # the usual mask, several times faster than OpenCV
        if array is not None:
            return array, encoded, 1  # its chunks hold no orientation
        if b"?" in _png_chunks(encoded):  # ends before IEND: libpng would print its own line
            raise DataError(f"cannot decode image file {path}: truncated (the PNG ends before "
                            f"its last chunk); replace or remove it")
    header = read_header(encoded, path) if encoded else None
    data = np.frombuffer(encoded, dtype=np.uint8)
    array = cv2.imdecode(data, cv2.IMREAD_UNCHANGED) if data.size else None
    if array is None:
        raise _undecodable(path, data)
    orientation = 1 if header is None else header[2]
    return _oriented(array, orientation), encoded, orientation


def _oriented(array: np.ndarray, orientation: int) -> np.ndarray:
    for op in _ORIENT.get(orientation, []):
        array = op(array)
    return array


def read_image(path: str | Path, encoded: bytes | None = None) -> np.ndarray:
    """Any image file -> uint8 RGB array (H, W, 3); grey is replicated, alpha is dropped."""
    return _rgb(to_uint8(_decoded(path, encoded)[0]))


def read_image_alpha(path: str | Path, encoded: bytes | None = None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`read_image` and the image's own alpha channel (uint8 (H, W), 16 bits as their
    high byte), None for an image without one: what a cut-out of it keeps transparent."""
    array = to_uint8(_decoded(path, encoded)[0])
    alpha = array[:, :, 3].copy() if array.ndim == 3 and array.shape[2] == 4 else None
    return _rgb(array), alpha


def _rgb(array: np.ndarray) -> np.ndarray:
    """Decoded uint8 pixels (grey, BGR or BGRA) as RGB."""
    if array.ndim == 2:
        return cv2.cvtColor(array, cv2.COLOR_GRAY2RGB)
    if array.shape[2] == 4:
        return cv2.cvtColor(array, cv2.COLOR_BGRA2RGB)
    if array.shape[2] == 1:
        return cv2.cvtColor(array[:, :, 0], cv2.COLOR_GRAY2RGB)
    return cv2.cvtColor(array, cv2.COLOR_BGR2RGB)


_REDUCED = {2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4,
            8: cv2.IMREAD_REDUCED_COLOR_8}


def reduction(height: int, width: int, at_least: tuple[int, int]) -> int:
    """The largest JPEG scale denominator (8, 4, 2, else 1) whose decoded image still has both
    sides at least ``at_least`` (H, W); libjpeg's scaled sides are ``ceil(side / f)``."""
    for factor in (8, 4, 2):
        if -(-height // factor) >= at_least[0] and -(-width // factor) >= at_least[1]:
            return factor
    return 1


def read_image_reduced(path: str | Path, at_least: tuple[int, int]) -> tuple[np.ndarray, int]:
    """:func:`read_image`, a JPEG decoded at 1/f scale (the largest f of 2, 4, 8 that keeps it
    at least ``at_least`` (H, W), after the EXIF orientation); returns the image and f (1: a
    full decode, as for every other format). The file's declared size is checked against the
    limits as for a full decode."""
    image, factor, _ = _reduced(path, at_least)
    return image, factor


def decoded_size(path: str | Path) -> tuple[int, int]:
    """(height, width) of an image, decoded to prove it decodes (a truncated or corrupt file is
    a DataError), a JPEG at 1/8 scale (bounded and fast, the whole file still read): what a
    full data check needs of the images, whose pixels it does not look at."""
    image, factor, shown = _reduced(path, (1, 1))
    return shown if factor > 1 else (image.shape[0], image.shape[1])


def _reduced(path: str | Path, at_least: tuple[int, int]
             ) -> tuple[np.ndarray, int, tuple[int, int]]:
    """:func:`read_image_reduced`'s image and factor, and the image's full (H, W) as shown."""
    encoded = read_file(path)
    header = read_header(encoded, path) if sniff_format(encoded[:16]) == "JPEG" else None
    if header is None:
        image = read_image(path, encoded)
        return image, 1, (image.shape[0], image.shape[1])
    width, height, orientation = header
    check_pixels(path, width, height)
    shown = (width, height) if orientation >= 5 else (height, width)
    factor = reduction(*shown, at_least)
    if factor == 1:
        return read_image(path, encoded), 1, shown
    data = np.frombuffer(encoded, dtype=np.uint8)
    array = cv2.imdecode(data, _REDUCED[factor] | cv2.IMREAD_IGNORE_ORIENTATION)
    if array is None:
        raise _undecodable(path, data)
    return cv2.cvtColor(_oriented(array, orientation), cv2.COLOR_BGR2RGB), factor, shown


def read_image_at(path: str | Path, shape: tuple[int, ...]) -> np.ndarray:
    """:func:`read_image` at the (H, W) ``shape`` of its GT (bilinear resize if it differs)."""
    image = read_image(path)
    if image.shape[:2] != tuple(shape[:2]):
        image = cv2.resize(image, (shape[1], shape[0]), interpolation=cv2.INTER_LINEAR)
    return image


def read_mask(path: str | Path, encoded: bytes | None = None) -> np.ndarray:
    """Any mask file -> uint8 grey (H, W), object bright, soft values kept (binarise ``> 128``).

    Grey, colour masks whose channels agree and 16-bit masks read exactly as
    ``cv2.imread(p, cv2.IMREAD_GRAYSCALE)`` reads them (PySODEvalToolkit's and PySODMetrics'
    reader; :mod:`sodkit.grey`); an alpha channel is ignored. Other encodings (0/1 label maps,
    16-bit masks holding 0..255, a colour on black, palette label maps) are converted, or
    refused, by :func:`sodkit.mask_encoding.decode_mask`, the one place that decides for every
    reader (training, evaluation, ``sodkit eval``, check-data). ``encoded``: the file's bytes
    where the caller holds them (the Python API's ``mask=`` bytes; ``path`` names them).
    """
    given = encoded
    raw, encoded, orientation = _decoded(path, encoded)
    palette = raw.ndim == 3 and (_stores_palette(path) if given is None
                                 else _holds_palette(encoded[:26]))
    return decode_mask(raw, palette, path, grey=lambda: _opencv_grey(raw, encoded, orientation))


def read_matte(path: str | Path) -> np.ndarray:
    """:func:`read_mask` for training targets: a 16-bit grey alpha matte (values above 255)
    keeps its 16 bits (uint16, 1/65535 steps) instead of its high byte; every other file reads
    as :func:`read_mask` reads it (uint8)."""
    raw, encoded, orientation = _decoded(path)
    if raw.dtype == np.uint16 and raw.ndim == 2 and int(raw.max()) > 255:
        return np.ascontiguousarray(raw)
    return decode_mask(raw, raw.ndim == 3 and _stores_palette(path), path,
                       grey=lambda: _opencv_grey(raw, encoded, orientation))


def _opencv_grey(raw: np.ndarray, encoded: bytes, orientation: int) -> np.ndarray:
    """What ``cv2.imread(p, IMREAD_GRAYSCALE)`` returns for a colour file whose decoded pixels
    are ``raw`` (upright): libpng's arithmetic for a plain PNG, else OpenCV's grey decode."""
    from .grey import COLOUR_CHUNKS, decoded_grey, png_grey

    if encoded.startswith(_PNG_SIGNATURE) and _png_chunks(encoded).isdisjoint(COLOUR_CHUNKS):
        return png_grey(raw)
    grey = decoded_grey(encoded)
    if grey is None:  # decoded in colour, not as grey: OpenCV's conversion of the colours
        return cv2.cvtColor(to_uint8(raw)[:, :, :3], cv2.COLOR_BGR2GRAY)
    return _oriented(grey, orientation)


def _stores_palette(path: str | Path) -> bool:
    """Whether the file holds palette indices (PNG colour type 3, GIF), from its first bytes;
    asked only of files that decode to colour (no grey mask pays the extra read)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(26)
    except OSError:
        return False
    return _holds_palette(head)


def _holds_palette(head: bytes) -> bool:
    return head.startswith(b"GIF8") or (head.startswith(_PNG_SIGNATURE) and head[25:26] == b"\x03")


def encode_mask(mask: np.ndarray) -> bytes:
    """A uint8 (H, W) mask as PNG bytes (lossless): what :func:`write_mask` writes."""
    if mask.dtype != np.uint8 or mask.ndim != 2:
        raise ValueError(f"write_mask expects uint8 (H, W), got {mask.dtype} {mask.shape}")
    ok, buf = cv2.imencode(".png", mask)
    if not ok:
        raise OSError("cannot encode a PNG mask")
    return buf.tobytes()


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write an encoded file, creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_mask(path: str | Path, mask: np.ndarray) -> None:
    """Write a uint8 (H, W) mask as PNG (lossless), creating parent folders."""
    write_bytes(path, encode_mask(mask))


def list_images(folder: str | Path) -> dict[str, Path]:
    """Image files of a folder by stem (non-recursive); two files with one stem is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"folder not found: {folder}")
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() not in IMAGE_EXTENSIONS or not path.is_file():
            continue
        if path.stem in found:
            raise DataError(f"two files with stem {path.stem!r} in {folder}: "
                            f"{found[path.stem].name} and {path.name}; keep one")
        found[path.stem] = path
    return found
