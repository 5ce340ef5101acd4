"""The EXIF orientation of PNG files without a second decode, equal to Pillow's answer.

Pillow decodes a whole PNG to find its orientation; ``exif_orientation`` answers from the file's
bytes when no chunk that could carry one is present, and asks Pillow otherwise. Each PNG way of
storing an orientation (eXIf chunk, a text chunk with ImageMagick's raw profile, compressed or
not, an XMP iTXt chunk) must still be found.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, PngImagePlugin

from sodkit.imageio import EXIF_ORIENTATION, exif_orientation, read_mask


def _png(info: PngImagePlugin.PngInfo | None = None, exif: Image.Exif | None = None) -> bytes:
    pixels = np.random.default_rng(0).integers(0, 256, (12, 20), dtype=np.uint8)
    buffer = io.BytesIO()
    extra = {"exif": exif} if exif is not None else {}
    Image.fromarray(pixels).save(buffer, format="PNG", pnginfo=info, **extra)
    return buffer.getvalue()


def _raw_profile(orientation: int, compressed: bool) -> PngImagePlugin.PngInfo:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    data = exif.tobytes()
    info = PngImagePlugin.PngInfo()
    info.add_text("Raw profile type exif", f"\nexif\n{len(data)}\n{data.hex()}", zip=compressed)
    return info


def _xmp(orientation: int) -> PngImagePlugin.PngInfo:
    info = PngImagePlugin.PngInfo()
    info.add_itxt("XML:com.adobe.xmp", f'<x:xmpmeta><rdf:Description tiff:Orientation='
                                       f'"{orientation}"/></x:xmpmeta>')
    return info


def _exif(orientation: int) -> Image.Exif:
    exif = Image.Exif()
    exif[EXIF_ORIENTATION] = orientation
    return exif


@pytest.mark.parametrize("store", ["eXIf", "tEXt", "zTXt", "iTXt"])
def test_every_png_orientation_chunk_is_found(store):
    data = {"eXIf": lambda: _png(exif=_exif(6)), "tEXt": lambda: _png(_raw_profile(6, False)),
            "zTXt": lambda: _png(_raw_profile(6, True)), "iTXt": lambda: _png(_xmp(6))}[store]()
    assert store.encode() in data
    with Image.open(io.BytesIO(data)) as image:
        assert image.getexif().get(EXIF_ORIENTATION) == 6  # Pillow sees it: the reference
    assert exif_orientation(data) == 6


def test_a_plain_png_is_orientation_one_and_reads_as_decoded(tmp_path):
    data = _png()
    assert not any(name in data for name in (b"eXIf", b"tEXt", b"zTXt", b"iTXt"))
    assert exif_orientation(data) == 1
    (tmp_path / "m.png").write_bytes(data)
    with Image.open(tmp_path / "m.png") as image:
        assert np.array_equal(read_mask(tmp_path / "m.png"), np.asarray(image))


def test_pillow_s_own_bomb_check_never_decides(tmp_path, monkeypatch):
    """A PNG with a text chunk goes to Pillow for its orientation. Pillow raises its own
    ``DecompressionBombError`` (a traceback) above twice ``Image.MAX_IMAGE_PIXELS`` (179
    megapixels by default, so a real 13500x13500 scan failed); sodkit's SODKIT_MAX_PIXELS
    decides instead, and Pillow's setting is left as it was."""
    from sodkit.errors import DataError

    data = _png(_raw_profile(1, False))
    (tmp_path / "m.png").write_bytes(data)
    with Image.open(io.BytesIO(data)) as image:
        expected = np.asarray(image)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 50)  # stands in for a 180-megapixel image
    mask = read_mask(tmp_path / "m.png")
    assert np.array_equal(mask, expected) and Image.MAX_IMAGE_PIXELS == 50
    monkeypatch.setenv("SODKIT_MAX_PIXELS", "100")
    with pytest.raises(DataError, match=r"m\.png: its header declares 20x12 pixels"):
        read_mask(tmp_path / "m.png")
    assert Image.MAX_IMAGE_PIXELS == 50
