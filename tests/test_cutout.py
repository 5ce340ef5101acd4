"""``sodkit predict --save mask|soft|binary|cutout|overlay`` (#23 part 5) and the rendering module
it shares with the Python API (sodkit/inference/render.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.imageio import read_image, read_mask
from sodkit.inference.render import Rendering, cutout, parse_color
from tests.conftest import ROOT


def _read_png(path: Path) -> np.ndarray:
    """The PNG as stored (16-bit kept), colour in RGB(A) order."""
    array = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if array.ndim == 3:
        code = cv2.COLOR_BGRA2RGBA if array.shape[2] == 4 else cv2.COLOR_BGR2RGB
        array = cv2.cvtColor(array, code)
    return array


@pytest.fixture(scope="module")
def saved(trained, data_root, tmp_path_factory) -> tuple[Path, Path, list[Path]]:
    """``--save mask`` (the default) of the test images, and the folder to write others in."""
    folder = tmp_path_factory.mktemp("save")
    images = sorted((data_root / "DUTS-TE" / "DUTS-TE-Image").glob("*.jpg"))[:3]
    checkpoint = trained / "checkpoints" / "last.pt"
    assert main(["predict", "--checkpoint", str(checkpoint), "--out", str(folder / "mask"),
                 "--workers", "0", *map(str, images)]) == 0
    return checkpoint, folder, images


def _predict(saved, name: str, *options: str) -> Path:
    checkpoint, folder, images = saved
    out = folder / name
    assert main(["predict", "--checkpoint", str(checkpoint), "--out", str(out), "--workers", "0",
                 *options, *map(str, images)]) == 0
    return out


def test_soft_and_binary_are_the_mask_finer_and_thresholded(saved):
    _, folder, images = saved
    soft = _predict(saved, "soft", "--save", "soft")
    binary = _predict(saved, "binary", "--save", "binary", "--threshold", "0.4")
    for image in images:
        mask = read_mask(folder / "mask" / f"{image.stem}.png").astype(np.int32)
        deep = _read_png(soft / f"{image.stem}.png")
        assert deep.dtype == np.uint16 and deep.shape == mask.shape
        assert np.abs(deep / 257.0 - mask).max() <= 0.51  # 65535 / 255 = 257 steps per level
        flat = _read_png(binary / f"{image.stem}.png")
        assert set(np.unique(flat)) <= {0, 255}
        assert ((flat == 255) == (deep / 65535.0 >= 0.4)).mean() > 0.999


def test_cutout_is_rgba_at_the_image_size_and_overlay_tints(saved):
    _, folder, images = saved
    rgba = _predict(saved, "cutout", "--save", "cutout")
    white = _predict(saved, "white", "--save", "cutout", "--background", "#ffffff")
    tinted = _predict(saved, "overlay", "--save", "overlay", "--tint", "0,255,0")
    for image in images:
        rgb = read_image(image)
        mask = read_mask(folder / "mask" / f"{image.stem}.png")
        cut = _read_png(rgba / f"{image.stem}.png")
        assert cut.shape == (*rgb.shape[:2], 4)
        assert np.array_equal(cut[:, :, :3], rgb) and np.array_equal(cut[:, :, 3], mask)
        solid = _read_png(white / f"{image.stem}.png")
        assert solid.shape == rgb.shape and (solid[mask == 0] == 255).all()
        assert np.array_equal(solid[mask == 255], rgb[mask == 255])
        over = _read_png(tinted / f"{image.stem}.png").astype(np.int32)
        assert over.shape == rgb.shape
        strong = mask > 200
        if strong.any():  # the tint pulls green up where the object is
            assert (over[strong, 1] >= rgb[strong, 1]).all()


def test_save_options_are_checked_before_any_work(saved, capsys):
    checkpoint, folder, images = saved
    base = ["predict", "--checkpoint", str(checkpoint), "--workers", "0", str(images[0])]
    for options, message in ((["--save", "cutout", "--background", "pink"],
                              "--background 'pink': not a colour"),
                             (["--background", "white"], "apply to --save cutout"),
                             (["--save", "binary", "--threshold", "1.5"],
                              "argument --threshold: must be in [0, 1], got 1.5")):
        out = folder / "refused"
        try:
            code = main([*base, "--out", str(out), *options])
        except SystemExit as usage:  # argparse's own refusal (the option's range)
            code = usage.code
        assert code == 2
        assert message in capsys.readouterr().err
        assert not out.exists()


def test_colours_and_backgrounds():
    assert parse_color("white") == (255, 255, 255) == parse_color("#FFF")
    assert parse_color("#102030") == (16, 32, 48) == parse_color("16, 32, 48")
    for bad in ("#12", "256,0,0", "pink", "1,2"):
        with pytest.raises(UserError):
            parse_color(bad)
    image = np.full((2, 2, 3), 200, np.uint8)
    prob = np.array([[0.0, 0.5], [1.0, 0.25]], np.float32)
    assert cutout(image, prob)[:, :, 3].tolist() == [[0, 128], [255, 64]]
    on_black = cutout(image, prob, (0, 0, 0))
    assert on_black[:, :, 0].tolist() == [[0, 100], [200, 50]]
    assert Rendering("binary", 0.5).array(prob).tolist() == [[0, 255], [255, 0]]


@pytest.mark.slow  # numba compiles pymatting's estimator on first use: 4 s of CPU (all of it: 41 s)
def test_foreground_estimation_removes_the_old_background_colour():
    """A soft edge over a red background: the estimate's colour there is the object's (blue),
    not the mix that the plain cut-out keeps."""
    height, width = 24, 24
    alpha = np.zeros((height, width), np.float32)
    alpha[:, 8:16] = np.linspace(0, 1, 8)[None, :]
    alpha[:, 16:] = 1.0
    fg, bg = np.array([0, 0, 255], np.float32), np.array([255, 0, 0], np.float32)
    image = np.round(alpha[..., None] * fg + (1 - alpha[..., None]) * bg).astype(np.uint8)
    plain = Rendering("cutout").array(alpha, image)
    estimated = Rendering("cutout", foreground=True).array(alpha, image)
    edge = (slice(None), slice(10, 14))
    assert plain[edge][..., 0].mean() > 60  # the red of the old background
    assert estimated[edge][..., 0].mean() < plain[edge][..., 0].mean() / 3
    assert np.array_equal(estimated[:, :, 3], plain[:, :, 3])


def test_missing_pymatting_is_one_line():
    code = ("import sys; sys.modules['pymatting'] = None\n"
            "from sodkit.foreground import check_foreground_estimation\n"
            "check_foreground_estimation()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode != 0
    assert "foreground estimation needs pymatting: pip install -e '.[cutout]'" in proc.stderr
    # and the command says it in one line, exit 2, before it reads anything
    code = ("import sys; sys.modules['pymatting'] = None\n"
            "from sodkit.cli import main\n"
            "sys.exit(main(['predict', '--checkpoint', 'x.pt', '--out', 'o', '--save', "
            "'cutout', '--estimate-foreground', 'in.jpg']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr


def test_sodkit_cutout_composes_without_a_model():
    """``sodkit.cutout`` (#33): an image and its map -> RGBA with the map as alpha, as
    ``predict --save cutout`` writes it; on a colour, RGB."""
    import sodkit

    image = np.full((4, 5, 3), 200, np.uint8)
    prob = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    rgba = sodkit.cutout(image, prob)
    assert rgba.shape == (4, 5, 4) and (rgba[..., :3] == image).all()
    assert (rgba[..., 3] == np.round(prob * 255).astype(np.uint8)).all()
    on_black = sodkit.cutout(image, prob, background=(0, 0, 0))
    assert on_black.shape == (4, 5, 3) and on_black[0, 0, 0] == 0 and on_black[-1, -1, 0] == 200
