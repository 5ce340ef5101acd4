"""The Python API's inputs (#32 items 6-7, #33 item 4): every kind of image goes through one
conversion, which reads its values as a file's are read or refuses them in one line; bytes in,
PNG bytes out; a cut-out from a mask already computed runs no forward pass; backgrounds."""

from __future__ import annotations

import io
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

import sodkit
from sodkit.errors import UserError
from sodkit.imageio import read_image
from sodkit.inference.render import background_of, color_of, cutout, fitted, parse_color


@pytest.fixture(scope="module")
def model(trained):
    """On PyTorch: these tests count and measure its forward passes (onnxruntime's memory
    probe and masks: tests/test_runtimes.py)."""
    return sodkit.load(trained / "checkpoints" / "last.pt", device="cpu", runtime="torch")


@pytest.fixture(scope="module")
def photo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("photo") / "photo.png"
    rng = np.random.default_rng(5)
    cv2.imwrite(str(path), rng.integers(0, 256, (36, 44, 3), np.uint8))
    return path


def _forwards(model) -> list[int]:
    calls: list[int] = []
    model.network.register_forward_hook(lambda *_: calls.append(1))
    return calls


def test_silently_wrong_inputs_are_refused_in_one_line(model, photo):
    """A float image on the 0-255 scale was clamped to white; a NaN tensor read as black."""
    rgb = read_image(photo)
    chw = torch.from_numpy(rgb).permute(2, 0, 1)
    for bad, message in ((chw.float(), "float values from 0 to 2"),
                         (rgb.astype(np.float64), "divide by 255"),
                         (torch.full((3, 8, 8), float("nan")), "NaN"),
                         (np.full((8, 8, 3), np.inf, np.float32), "NaN or infinite"),
                         (chw.float() / 255 - 0.1, "float values from -0.1"),
                         (np.full((8, 8), 300, np.int64), "int64 values from 300 to 300"),
                         (np.zeros((8, 8), bool), "bool pixels are no image"),
                         (Image.fromarray(np.full((8, 8), 70000, np.int32)),
                          "16-bit ones as uint16"),
                         (np.zeros((0, 0, 3), np.uint8), "is empty (0x0 pixels)"),
                         (torch.zeros(3, 0, 0), "is empty (0x0 pixels)"),
                         (np.zeros((5, 0), np.uint8), "is empty (0x5 pixels)"),
                         (chw.numpy(), "looks channels-first"),
                         (chw[None], "(a batch? give a list)"),
                         (b"GIF89a but not", "truncated or corrupt"),
                         (b"hello", "is not an image")):
        with pytest.raises(UserError, match=None) as refused:
            model.predict(bad)
        assert message in str(refused.value) and "\n" not in str(refused.value), refused.value
    with pytest.raises(UserError, match="image 1 holds NaN"):
        model.predict([rgb, torch.full((3, 8, 8), float("nan"))])


def test_every_kind_of_input_reads_as_the_file(model, photo, tmp_path):
    """One conversion: the same pixels give the same map whatever they came in, 16-bit data
    included (a PIL ``I;16`` image was fed clamped, up to 254 grey levels off)."""
    rgb = read_image(photo)
    expected = model.predict(photo, batch_size=1)
    chw = torch.from_numpy(rgb).permute(2, 0, 1)
    alpha = np.full(rgb.shape[:2], 77, np.uint8)
    same = [photo.read_bytes(), bytearray(photo.read_bytes()), rgb.astype(np.int64),
            rgb / 255.0, chw.half() / 255, chw.double() / 255,
            np.dstack([rgb, alpha]), torch.cat([chw, torch.from_numpy(alpha)[None]]),
            Image.fromarray(np.dstack([rgb, alpha]), "RGBA")]
    for got in model.predict(same, batch_size=1):
        assert np.abs(got - expected).max() <= 1 / 255
    deep = (np.random.default_rng(2).integers(0, 65536, (20, 24), np.int64)).astype(np.uint16)
    cv2.imwrite(str(tmp_path / "deep.png"), deep)
    from_file = model.predict(tmp_path / "deep.png", batch_size=1)
    for item in (Image.open(tmp_path / "deep.png"), deep, (tmp_path / "deep.png").read_bytes()):
        assert np.array_equal(model.predict(item, batch_size=1), from_file)
    assert Image.open(tmp_path / "deep.png").mode.startswith("I")
    assert model.predict((chw / 255.0).to(torch.bfloat16)).shape == rgb.shape[:2]


def test_cutout_from_a_mask_runs_no_forward_and_takes_bytes(model, photo):
    rgb = read_image(photo)
    mask = model.predict(photo)
    expected = np.asarray(model.cutout(photo))
    calls = _forwards(model)
    for given in (mask, (mask * 255).round().astype(np.uint8), torch.from_numpy(mask)[None],
                  Image.fromarray((mask * 255).round().astype(np.uint8))):
        assert np.array_equal(np.asarray(model.cutout(photo, mask=given)), expected)
    assert calls == []
    png = model.cutout(photo.read_bytes(), mask=mask, background="white")
    assert isinstance(png, bytes) and png.startswith(b"\x89PNG")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png))),
                          cutout(rgb, mask, (255, 255, 255)))
    listed = model.cutout([photo, rgb], mask=[mask, mask])
    assert all(np.array_equal(np.asarray(one), expected) for one in listed) and calls == []
    for bad, message in (((mask[:10], None), "mask is 44x10 pixels, its image 44x36"),
                         ((mask * 255, None), "a float mask is a probability"),
                         ((np.dstack([mask, mask * 0, mask]), None), "channels differ"),
                         (([mask], [photo, photo]), "1 masks for 2 images")):
        with pytest.raises(UserError, match=None) as refused:
            model.cutout(photo if bad[1] is None else bad[1], mask=bad[0])
        assert message in str(refused.value), refused.value
    assert calls == []


def test_an_rgba_image_keeps_its_transparency_in_the_cutout(model, photo):
    rgb = read_image(photo)
    alpha = np.zeros(rgb.shape[:2], np.uint8)
    alpha[:, 20:] = 255
    cut = np.asarray(model.cutout(np.dstack([rgb, alpha])))
    plain = np.asarray(model.cutout(rgb))
    assert (cut[:, :20, 3] == 0).all() and np.array_equal(cut[:, 20:], plain[:, 20:])


def test_backgrounds_in_the_api(model, photo, tmp_path):
    """A colour (text or three integers in 0-255), blur, an image file or an image in memory;
    ``(300, -5, 0)`` was accepted where the command refused 256."""
    rgb, mask = read_image(photo), model.predict(photo)
    beach = np.random.default_rng(3).integers(0, 256, (9, 16, 3), np.uint8)
    cv2.imwrite(str(tmp_path / "beach.png"), cv2.cvtColor(beach, cv2.COLOR_RGB2BGR))
    under = fitted(beach, *rgb.shape[:2])
    for background, expected in (((0, 128, 255), cutout(rgb, mask, (0, 128, 255))),
                                 (np.array([0, 128, 255], np.uint8),
                                  cutout(rgb, mask, (0, 128, 255))),
                                 ("blur", cutout(rgb, mask, "blur")),
                                 (tmp_path / "beach.png", cutout(rgb, mask, under)),
                                 (str(tmp_path / "beach.png"), cutout(rgb, mask, under)),
                                 (Image.fromarray(beach), cutout(rgb, mask, under)),
                                 ((tmp_path / "beach.png").read_bytes(),
                                  cutout(rgb, mask, under))):
        got = np.asarray(model.cutout(photo, mask=mask, background=background))
        assert np.array_equal(got, expected), background
    assert under.shape == rgb.shape
    calls = _forwards(model)
    for bad in ((300, -5, 0), (1, 2), (1.5, 2, 3), (True, 0, 0), "²,1,1", "٣,1,1", "#12345",
                "nonsense", tmp_path / "missing.png", "missing.png"):
        with pytest.raises(UserError, match="background") as refused:
            model.cutout(photo, background=bad)
        assert "\n" not in str(refused.value)
    assert calls == []  # refused before any forward pass


def test_colours_parse_alike_everywhere():
    assert parse_color(" 16, 32 ,48 ") == (16, 32, 48) == color_of((16, 32, 48))
    assert parse_color("#ABC") == (170, 187, 204) == color_of(np.array([170, 187, 204]))
    assert background_of("Blur") == "blur" and background_of(None) is None
    for bad in ("²,1,1", "1,2", "1,2,3,4", "256,0,0", "-1,0,0", "0x10,0,0", "", "#ggg"):
        with pytest.raises(UserError):
            parse_color(bad)
    image = np.full((4, 6, 3), 200, np.uint8)
    prob = np.zeros((4, 6), np.float32)
    prob[:, 3:] = 1.0
    on_image = cutout(image, prob, np.zeros((2, 2, 3), np.uint8) + 9)
    assert (on_image[:, :3] == 9).all() and (on_image[:, 3:] == 200).all()
    noise = np.random.default_rng(0).integers(0, 256, (300, 400, 3), np.uint8)
    blurred = cutout(noise, np.zeros((300, 400), np.float32), "blur").astype(np.float32)
    assert blurred.shape == noise.shape and abs(blurred.mean() - noise.mean()) < 2
    assert np.diff(blurred, axis=1).std() < np.diff(noise.astype(np.float32), axis=1).std() / 20


def test_the_api_batch_is_bounded_by_the_memory(model, photo, monkeypatch):
    """``batch_size`` times the memory of one image beyond the budget is refused before any
    forward pass, naming what to lower; the default batch fits."""
    from sodkit.engine.batch_memory import choose_batch

    calls = _forwards(model)
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "1")
    with pytest.raises(UserError, match="batch_size 1000 at 64 px needs about") as refused:
        model.predict([photo] * 3, batch_size=1000)
    assert "lower batch_size" in str(refused.value)
    assert len(calls) == 2  # the probe's two passes on a random image, none on the photos
    for bad in (0, -1, 2.5, True, "8"):
        with pytest.raises(UserError, match="batch_size must be"):
            model.predict(photo, batch_size=bad)
    monkeypatch.delenv("SODKIT_MAX_MEMORY_MB")
    assert len(model.predict([photo] * 3)) == 3
    cpu = torch.device("cpu")
    assert choose_batch(10 << 20, 64, cpu, None).batch == 8
    assert choose_batch(10 << 20, 1024, cpu, None).batch == 1  # the CPU's 1-megapixel rule
    assert choose_batch(10 << 20, 512, cpu, None).batch == 4
    assert choose_batch(None, 320, cpu, None).batch == 8  # not measured: the size rule alone
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "64")
    assert choose_batch(10 << 20, 64, cpu, None).batch == 3  # half of 64 MiB, 10 MiB each


def test_the_probe_measures_what_a_forward_pass_allocates(model):
    """The per-image figure the batch is chosen from is within a factor of what torch's
    allocator reports for a real forward pass at the full side (torch.profiler, exact)."""
    from sodkit.engine.batch_memory import probe_side
    from sodkit.engine.memory import AllocatedPeak
    from sodkit.engine.predictor import probe_memory
    from sodkit.engine.runtime import OnDevice as _Local
    from sodkit.inference.forward import eval_mode
    from sodkit.inference.pipelines import build_test_transform

    transform = build_test_transform(model.config.data, size=256)
    estimate = probe_memory(model.network, transform, _Local(torch.device("cpu")), 256)
    assert probe_side(256) == 128 and probe_side(1024) == 128 and probe_side(320) == 160
    assert probe_side(352) == 352 and probe_side(64) == 64
    with eval_mode(model.network):
        model.network(torch.randn(1, 3, 256, 256))
        with AllocatedPeak() as peak:
            model.network(torch.randn(1, 3, 256, 256))
    assert peak.added_bytes / 2 <= estimate <= peak.added_bytes * 2, (estimate, peak.added_bytes)
