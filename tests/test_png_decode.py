"""sodkit.png: 8-bit grey PNGs decoded with one inflate, equal to OpenCV pixel for pixel.

The oracle is ``cv2.imdecode(..., IMREAD_UNCHANGED)``, which ``read_mask`` used for every file
before. PNGs are written by OpenCV, Pillow and by a small encoder here that chooses each row's
filter, so every filter and every mix of them is decoded; files outside the fast path must be
declined (``None``) so that OpenCV decodes them, with its errors.
"""

from __future__ import annotations

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from sodkit.imageio import read_mask
from sodkit.metrics.testing import realistic_pairs
from sodkit.png import SIGNATURE, decode_grey


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))


def _filtered(pixels: np.ndarray, filters: list[int]) -> bytes:
    """PNG scanlines of a uint8 grey image, row y filtered with ``filters[y]`` (spec 9.2)."""
    height, width = pixels.shape
    image = pixels.astype(np.int32)
    rows = []
    for y in range(height):
        x = image[y]
        a = np.concatenate([[0], x[:-1]])  # left
        b = image[y - 1] if y else np.zeros(width, np.int32)  # up
        c = np.concatenate([[0], b[:-1]])  # up-left
        if filters[y] == 0:
            out = x
        elif filters[y] == 1:
            out = x - a
        elif filters[y] == 2:
            out = x - b
        elif filters[y] == 3:
            out = x - (a + b) // 2
        else:
            p = a + b - c
            pa, pb, pc = np.abs(p - a), np.abs(p - b), np.abs(p - c)
            predictor = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
            out = x - predictor
        rows.append(bytes([filters[y]]) + (out % 256).astype(np.uint8).tobytes())
    return b"".join(rows)


def encode(pixels: np.ndarray, filters: list[int], *, level: int = 6, idat_parts: int = 1,
           before_idat: bytes = b"", after_idat: bytes = b"", ihdr: bytes | None = None) -> bytes:
    """A grey 8-bit PNG with the given row filters, IDAT split into ``idat_parts`` chunks and
    extra chunks before / after the image data."""
    height, width = pixels.shape
    header = ihdr if ihdr is not None else struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    stream = zlib.compress(_filtered(pixels, filters), level)
    bounds = np.linspace(0, len(stream), idat_parts + 1).astype(int)
    idat = b"".join(_chunk(b"IDAT", stream[s:e]) for s, e in zip(bounds[:-1], bounds[1:],
                                                                  strict=True))
    return (SIGNATURE + _chunk(b"IHDR", header) + before_idat + idat + after_idat
            + _chunk(b"IEND", b""))


def opencv(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)


def assert_decodes_as_opencv(data: bytes) -> None:
    ours = decode_grey(data)
    assert ours is not None, "the fast path declined a plain 8-bit grey PNG"
    expected = opencv(data)
    assert ours.dtype == np.uint8 and ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)
    assert ours.flags.c_contiguous and ours.flags.writeable  # callers may write into masks


PAIRS = realistic_pairs(6, 41, 57, seed=3)


@pytest.mark.parametrize("which", ["pred", "gt"])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_masks_written_by_opencv(which, level):
    for pred, gt in PAIRS:
        image = pred if which == "pred" else gt
        ok, encoded = cv2.imencode(".png", image, [cv2.IMWRITE_PNG_COMPRESSION, level])
        assert ok
        assert_decodes_as_opencv(encoded.tobytes())


@pytest.mark.parametrize("options", [{}, {"optimize": True}, {"compress_level": 0}])
def test_masks_written_by_pillow_with_adaptive_filters(options):
    """Pillow picks a filter per row, Paeth and Average included."""
    for pred, gt in PAIRS:
        for image in (pred, gt):
            buffer = io.BytesIO()
            Image.fromarray(image).save(buffer, "PNG", **options)
            assert_decodes_as_opencv(buffer.getvalue())


@pytest.mark.parametrize("pattern", [
    [0] * 12, [1] * 12, [2] * 12, [3] * 12, [4] * 12,
    [2, 2, 2, 1, 2, 2, 0, 2, 1, 1, 2, 2],  # Up runs from the top and after other rows
    [1, 2, 3, 4, 0, 2, 2, 4, 3, 1, 0, 2],
    [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1],
])
def test_every_row_filter_and_mix(pattern):
    rng = np.random.default_rng(len(pattern) + sum(pattern))
    pixels = rng.integers(0, 256, (12, 23), dtype=np.uint8)
    assert_decodes_as_opencv(encode(pixels, pattern))


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (3, 5), (64, 3)])
def test_small_and_narrow_images(shape):
    rng = np.random.default_rng(shape[0] * 100 + shape[1])
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    for filters in ([1] * shape[0], [2] * shape[0], list(rng.integers(0, 3, shape[0])),
                    list(rng.integers(0, 5, shape[0]))):
        assert_decodes_as_opencv(encode(pixels, [int(f) for f in filters]))


def test_split_image_data_and_ignored_chunks():
    """Several IDAT chunks, and chunks that change nothing OpenCV returns."""
    pixels = np.random.default_rng(0).integers(0, 256, (30, 40), dtype=np.uint8)
    extra = (_chunk(b"gAMA", struct.pack(">I", 45455)) + _chunk(b"pHYs", bytes(9))
             + _chunk(b"sRGB", b"\x00"))
    assert_decodes_as_opencv(encode(pixels, [1, 2, 0] * 10, idat_parts=5, before_idat=extra,
                                     after_idat=_chunk(b"tIME", bytes(7))))


def test_fast_path_decodes_the_usual_masks_without_opencv_fallback():
    """Masks written by OpenCV take the prefix-sum path: Sub rows only."""
    ok, encoded = cv2.imencode(".png", PAIRS[0][0])
    raw = zlib.decompress(b"".join(
        _chunks_of(encoded.tobytes())[b"IDAT"]))
    width = PAIRS[0][0].shape[1]
    filters = set(raw[:: width + 1])
    assert filters <= {0, 1, 2}, filters  # what OpenCV writes: the path without libpng
    assert_decodes_as_opencv(encoded.tobytes())


def _chunks_of(data: bytes) -> dict[bytes, list[bytes]]:
    chunks: dict[bytes, list[bytes]] = {}
    position = len(SIGNATURE)
    while position < len(data):
        length = int.from_bytes(data[position:position + 4], "big")
        kind = data[position + 4:position + 8]
        chunks.setdefault(kind, []).append(data[position + 8:position + 8 + length])
        position += 12 + length
    return chunks


def _declined_files() -> dict[str, bytes]:
    rng = np.random.default_rng(5)
    grey = rng.integers(0, 256, (16, 16), dtype=np.uint8)
    plain = encode(grey, [1] * 16)

    def with_header(depth: int, colour: int, interlace: int = 0, size=(16, 16)) -> bytes:
        return encode(grey, [1] * 16, ihdr=struct.pack(">IIBBBBB", *size, depth, colour, 0, 0,
                                                       interlace))

    ok, colour = cv2.imencode(".png", np.dstack([grey] * 3))
    ok16, deep = cv2.imencode(".png", grey.astype(np.uint16) * 257)
    palette = io.BytesIO()
    Image.fromarray(grey).convert("P").save(palette, "PNG")
    idat = plain.index(b"IDAT")
    bad_crc = plain[:idat + 6] + bytes([plain[idat + 6] ^ 1]) + plain[idat + 7:]
    return {
        "colour": colour.tobytes(), "16-bit": deep.tobytes(), "palette": palette.getvalue(),
        "grey+alpha": with_header(8, 4), "interlaced": with_header(8, 0, interlace=1),
        "transparency": encode(grey, [1] * 16, before_idat=_chunk(b"tRNS", b"\x00\x00")),
        "text (may hold EXIF)": encode(grey, [1] * 16, after_idat=_chunk(b"tEXt", b"a\x00b")),
        "eXIf": encode(grey, [1] * 16, after_idat=_chunk(b"eXIf", b"MM\x00*")),
        "unknown chunk": encode(grey, [1] * 16, before_idat=_chunk(b"abCd", b"x")),
        "bad IDAT CRC": bad_crc,
        "truncated": plain[: len(plain) // 2],
        "no IEND": plain[: -12],
        "too few rows": encode(grey, [1] * 16, ihdr=struct.pack(">IIBBBBB", 16, 17, 8, 0, 0, 0,
                                                                0)),
        "bad filter byte": encode(grey, [1] * 15 + [5]),
        "too large for int32 sums": with_header(8, 0, size=(4000, 3000)),
        "not a PNG": b"GIF89a" + bytes(20),
    }


@pytest.mark.parametrize("name", sorted(_declined_files()))
def test_other_files_are_left_to_opencv(name):
    assert decode_grey(_declined_files()[name]) is None


def test_read_mask_still_reports_a_corrupt_png(tmp_path):
    """A PNG the fast path declines reaches OpenCV, and the error names the file."""
    from sodkit.errors import DataError

    path = tmp_path / "broken.png"
    path.write_bytes(_declined_files()["bad IDAT CRC"])
    with pytest.raises(DataError, match="broken.png"):
        read_mask(path)


def test_read_mask_equals_opencv_on_files(tmp_path):
    for i, (pred, gt) in enumerate(PAIRS):
        for name, image in (("pred", pred), ("gt", gt)):
            path = tmp_path / f"{name}{i}.png"
            cv2.imwrite(str(path), image)
            np.testing.assert_array_equal(read_mask(path), cv2.imread(str(path),
                                                                      cv2.IMREAD_UNCHANGED))


# ------------------------------------------------------------ bounds (docs/reliability.md)
def test_image_data_beyond_the_header_is_an_error_naming_the_file(tmp_path):
    """Inflating stops one byte past what IHDR declares: 64 MiB of zeros under a 4x4 header
    (64 KB on disk) are never inflated, and the file is named."""
    from sodkit.errors import DataError
    from tests.hostile_files import zero_png

    path = tmp_path / "liar.png"
    path.write_bytes(zero_png(4, 4, inflated=64 << 20))
    assert path.stat().st_size < 100_000
    with pytest.raises(DataError, match=r"liar\.png: holds more image data than its header "
                                        r"declares \(4x4"):
        read_mask(path)
    exact = zero_png(4, 4)  # the same builder, the declared size: decodes
    np.testing.assert_array_equal(decode_grey(exact), np.zeros((4, 4), np.uint8))


@pytest.mark.parametrize("kind", ["fast path", "colour PNG", "16-bit PNG", "PNG with text",
                                  "JPEG", "BMP"])
def test_every_decoder_refuses_more_pixels_than_the_limit(tmp_path, monkeypatch, kind):
    """SODKIT_MAX_PIXELS holds for every path a file can take, read from the header before any
    decoder runs; the message names the file and the setting."""
    from sodkit.errors import DataError

    grey = np.full((40, 30), 77, np.uint8)
    data = {
        "fast path": lambda: encode(grey, [1] * 40),
        "colour PNG": lambda: cv2.imencode(".png", np.dstack([grey] * 3))[1].tobytes(),
        "16-bit PNG": lambda: cv2.imencode(".png", grey.astype(np.uint16) * 257)[1].tobytes(),
        "PNG with text": lambda: encode(grey, [1] * 40, after_idat=_chunk(b"tEXt", b"a\x00b")),
        "JPEG": lambda: cv2.imencode(".jpg", grey)[1].tobytes(),
        "BMP": lambda: cv2.imencode(".bmp", grey)[1].tobytes(),
    }[kind]()
    path = tmp_path / "big.img"
    path.write_bytes(data)
    assert read_mask(path).shape == (40, 30)  # within the default limit
    monkeypatch.setenv("SODKIT_MAX_PIXELS", "1199")
    with pytest.raises(DataError, match=r"big\.img: its header declares 30x40 pixels.*"
                                        r"SODKIT_MAX_PIXELS="):
        read_mask(path)
    monkeypatch.setenv("SODKIT_MAX_PIXELS", "1200")
    assert read_mask(path).shape == (40, 30)


def test_a_file_larger_than_the_limit_is_not_read(tmp_path, monkeypatch):
    from sodkit.errors import DataError, UserError
    from tests.hostile_files import sparse_file

    path = sparse_file(tmp_path / "huge.png", (3 << 20) + 1)
    monkeypatch.setenv("SODKIT_MAX_FILE_MB", "3")
    with pytest.raises(DataError, match=r"huge\.png: the file is 3 MiB, more than the limit of "
                                        r"3 MiB.*SODKIT_MAX_FILE_MB=4"):
        read_mask(path)
    monkeypatch.setenv("SODKIT_MAX_FILE_MB", "lots")
    with pytest.raises(UserError, match="SODKIT_MAX_FILE_MB='lots': expected a positive whole"):
        read_mask(path)
