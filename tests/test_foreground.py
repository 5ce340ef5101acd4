"""Foreground estimation for cut-outs (issue 38, item 4): sodkit's blur-fusion equals the
authors' definition (BiRefNet image_proc.py FB_blur_fusion_foreground_estimator_cpu_2: two box
passes, radius 90 then 6, on the whole image in float32; rebuilt here from its formula) to
1/255, wherever the alpha's soft band lies (touching borders, thin strands, images smaller than
the window, all-0 and all-1 alphas); it removes the old background's colour from soft edges;
``predict --foreground`` and ``Model.cutout(foreground=)`` select it."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.foreground import blur_fusion, blur_fusion_uint8, check_estimator, estimate
from sodkit.inference.render import Rendering, cutout


def _definition(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """F' = F~ + a (I - a F~ - (1 - a) B~), F~ and B~ the alpha-weighted box means of F and
    B (+1e-5 guards), first with F = B = I at radius 90, then with the results at radius 6."""
    img = image.astype(np.float32) / 255
    a = (alpha.astype(np.float32) / 255)[:, :, None]

    def one(fg: np.ndarray, bg: np.ndarray, radius: int) -> tuple[np.ndarray, np.ndarray]:
        blurred_a = cv2.blur(a, (radius, radius))[:, :, None]
        blurred_fg = cv2.blur(fg * a, (radius, radius)) / (blurred_a + 1e-5)
        blurred_bg = cv2.blur(bg * (1 - a), (radius, radius)) / ((1 - blurred_a) + 1e-5)
        out = blurred_fg + a * (img - a * blurred_fg - (1 - a) * blurred_bg)
        return np.clip(out, 0, 1), blurred_bg

    fg, bg = one(img, img, 90)
    return one(fg, bg, 6)[0]


def _alphas(rng: np.random.Generator) -> list[tuple[str, np.ndarray]]:
    cases = []
    for height, width in ((120, 160), (37, 29), (200, 96)):
        blob = np.zeros((height, width), np.float32)
        cv2.circle(blob, (width // 3, height // 2), min(height, width) // 3, 1.0, -1)
        cases.append((f"blob{height}", cv2.GaussianBlur(blob, (0, 0), 2.5)))
        strands = np.zeros((height, width), np.float32)
        for _ in range(6):
            start = (int(rng.integers(width)), int(rng.integers(height)))
            end = (int(rng.integers(width)), int(rng.integers(height)))
            cv2.line(strands, start, end, float(rng.uniform(0.3, 1)), 1, cv2.LINE_AA)
        cases.append((f"strands{height}", strands))
        edge = np.zeros((height, width), np.float32)
        edge[:3, :] = 0.5  # a soft band on the top border
        edge[:, -2:] = 1.0  # and a solid one on the right border
        cases.append((f"border{height}", edge))
        cases.append((f"random{height}", rng.uniform(0, 1, (height, width)).astype(np.float32)))
    cases += [("empty", np.zeros((50, 60), np.float32)), ("full", np.ones((50, 60), np.float32))]
    return [(name, np.round(a * 255).astype(np.uint8)) for name, a in cases]


def test_blur_fusion_is_the_authors_definition_to_a_level() -> None:
    rng = np.random.default_rng(0)
    for name, alpha in _alphas(rng):
        image = rng.integers(0, 256, (*alpha.shape, 3), dtype=np.uint8)
        reference = _definition(image, alpha)
        ours = blur_fusion(image, alpha)
        assert ours.dtype == np.float32 and ours.shape == image.shape
        assert np.abs(ours - reference).max() < 1e-6, name  # measured: <= 1.8e-7
        as_uint8 = np.round(reference * 255).astype(np.int16)
        assert np.abs(blur_fusion_uint8(image, alpha) - as_uint8).max() <= 1, name


def test_blur_fusion_removes_the_old_background_colour() -> None:
    """A soft edge over a red background: the estimate's colour there is the object's (blue),
    not the mix that the plain cut-out keeps."""
    alpha = np.zeros((24, 24), np.float32)
    alpha[:, 8:16] = np.linspace(0, 1, 8)[None, :]
    alpha[:, 16:] = 1.0
    fg, bg = np.array([0, 0, 255], np.float32), np.array([255, 0, 0], np.float32)
    image = np.round(alpha[..., None] * fg + (1 - alpha[..., None]) * bg).astype(np.uint8)
    plain = Rendering("cutout").array(alpha, image)
    estimated = Rendering("cutout", foreground="blur-fusion").array(alpha, image)
    edge = (slice(None), slice(10, 14))
    assert plain[edge][..., 0].mean() > 60  # the red of the old background
    assert estimated[edge][..., 0].mean() < plain[edge][..., 0].mean() / 3
    assert np.array_equal(estimated[:, :, 3], plain[:, :, 3])
    assert np.array_equal(cutout(image, alpha, foreground="none"), plain)
    assert np.array_equal(estimate(image, np.zeros((24, 24), np.uint8), "none"), image)


def test_estimator_choice_is_checked_before_any_work(capsys) -> None:
    with pytest.raises(UserError, match="choose one of blur-fusion, ml, none"):
        check_estimator("fast")
    base = ["predict", "--checkpoint", "missing.pt", "--out", "o", "in.jpg"]
    assert main([*base, "--save", "cutout", "--foreground", "blur-fusion",
                 "--estimate-foreground"]) == 2
    assert "--estimate-foreground means --foreground ml" in capsys.readouterr().err
    assert main([*base, "--foreground", "blur-fusion"]) == 2
    assert "apply to --save cutout" in capsys.readouterr().err


def test_predict_cutout_with_blur_fusion_writes_its_colours(trained, data_root, tmp_path):
    """``predict --save cutout --foreground blur-fusion``: the mask as alpha, the estimator's
    colours under it (the same as the mask file and the image give)."""
    import cv2

    from sodkit.imageio import read_image, read_mask

    images = sorted((data_root / "DUTS-TE" / "DUTS-TE-Image").glob("*.jpg"))[:2]
    checkpoint = str(trained / "checkpoints" / "last.pt")
    base = ["predict", "--checkpoint", checkpoint, "--workers", "0", *map(str, images)]
    assert main([*base, "--out", str(tmp_path / "mask")]) == 0
    assert main([*base, "--out", str(tmp_path / "cut"), "--save", "cutout",
                 "--foreground", "blur-fusion"]) == 0
    for image in images:
        mask = read_mask(tmp_path / "mask" / f"{image.stem}.png")
        cut = cv2.cvtColor(cv2.imread(str(tmp_path / "cut" / f"{image.stem}.png"),
                                      cv2.IMREAD_UNCHANGED), cv2.COLOR_BGRA2RGBA)
        assert np.array_equal(cut[:, :, 3], mask)
        assert np.array_equal(cut[:, :, :3], blur_fusion_uint8(read_image(image), mask))
