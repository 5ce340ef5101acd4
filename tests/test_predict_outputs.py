"""``sodkit predict`` as a user of rembg runs it (#33 items 1, 4, 8, 9) and as a careless user
or an attacker would (#32 items 4-7): what it writes and where, what it says first and while
it works, and what it refuses before any forward pass."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.imageio import read_image, read_mask
from sodkit.inference.render import cutout, fitted, overlay
from tests.sod_fixtures import TINY_BACKBONE


def _photos(folder: Path, count: int = 3, seed: int = 0, names: list[str] | None = None
            ) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i, name in enumerate(names or [f"photo{i}.png" for i in range(count)]):
        cv2.imwrite(str(folder / name), rng.integers(0, 256, (30 + i, 40, 3), np.uint8))
    return folder


def _rgba(path: Path) -> np.ndarray:
    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_UNCHANGED), cv2.COLOR_BGRA2RGBA)


@pytest.fixture
def checkpoint(trained) -> str:
    return str(trained / "checkpoints" / "last.pt")


def test_one_image_and_a_file_name_write_that_file(checkpoint, tmp_path, run_cli):
    """rembg's habit: ``--out astro_cut.png`` names the file, not a folder, and the last line
    says a cut-out was written; with several kinds, NAME.<kind>.png."""
    photo = _photos(tmp_path / "in", 1) / "photo0.png"
    out = tmp_path / "astro_cut.png"
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--save", "cutout",
                   str(photo))
    assert done.returncode == 0, done.stderr
    assert out.is_file() and _rgba(out).shape == (30, 40, 4)
    assert np.array_equal(_rgba(out)[:, :, :3], read_image(photo))
    assert done.stderr.strip().splitlines()[-1] == f"wrote 1 cut-out to {out}"
    both = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "a.png"),
                   "--save", "mask,cutout", str(photo))
    assert both.returncode == 0, both.stderr
    assert np.array_equal(read_mask(tmp_path / "a.mask.png"), _rgba(out)[:, :, 3])
    assert np.array_equal(_rgba(tmp_path / "a.cutout.png"), _rgba(out))
    assert "wrote 1 mask and 1 cut-out to" in both.stderr
    for bad, message in ((["--out", str(tmp_path / "x.jpg")], "writes PNG files"),
                         (["--out", str(tmp_path / "y.png"), str(tmp_path / "in")],
                          "names one file, but 2 images")):
        _photos(tmp_path / "in", 2)
        refused = run_cli("predict", "--checkpoint", checkpoint, *bad, str(photo))
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1


def test_several_kinds_from_one_pass_each_in_its_own_folder(checkpoint, tmp_path, run_cli):
    photos = _photos(tmp_path / "in", 3)
    alone = tmp_path / "alone"
    assert run_cli("predict", "--checkpoint", checkpoint, "--out", str(alone), str(photos)
                   ).returncode == 0
    out = tmp_path / "out"
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--save",
                   "mask,cutout", "--save", "overlay", "--save", "mask", "--background",
                   "0,0,255", str(photos))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "cutout", "mask", "overlay"]
    for i in range(3):
        name = f"photo{i}.png"
        assert (out / "mask" / name).read_bytes() == (alone / name).read_bytes()
        mask, rgb = read_mask(alone / name), read_image(photos / name)
        on_blue = cutout(rgb, mask / np.float32(255), (0, 0, 255))
        assert np.array_equal(read_image(out / "cutout" / name), on_blue)
        tinted = overlay(rgb, mask / 255.0).astype(int)  # from the unrounded map: to 1 level
        assert np.abs(read_image(out / "overlay" / name).astype(int) - tinted).max() <= 1
    assert "wrote 3 masks, 3 cut-outs and 3 overlays to" in done.stderr
    again = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--save",
                    "mask,cutout", "--save", "overlay", str(photos))
    assert again.returncode == 0, again.stderr  # its own files, unchanged: replaced
    refused = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--save",
                      "mask,nonsense", str(photos))
    assert refused.returncode == 2 and "'nonsense' is not one of" in refused.stderr


def test_one_forward_pass_gives_every_kind(trained, tmp_path):
    """``predict_files`` with three kinds runs the network once per batch (a forward hook on
    the real network counts)."""
    from sodkit.api import load
    from sodkit.config import RuntimeCfg
    from sodkit.engine.predictor import predict_files
    from sodkit.engine.runtime import Runtime
    from sodkit.inference.pipelines import build_test_transform
    from sodkit.inference.render import Rendering
    from sodkit.predict_plan import plan, resolve

    photos = sorted(_photos(tmp_path / "in", 5).iterdir())
    model = load(trained / "checkpoints" / "last.pt", device="cpu")
    calls = []
    model.network.register_forward_hook(lambda *_: calls.append(1))
    kinds = [("mask", None), ("cutout", Rendering("cutout")), ("soft", Rendering("soft"))]
    targets = plan(tmp_path / "out", [str(tmp_path / "in")], photos, [k for k, _ in kinds])
    runtime = Runtime(RuntimeCfg(device="cpu", precision="fp32"))
    try:
        predict_files(model.network, photos, build_test_transform(model.config.data),
                      runtime, tmp_path / "out", batch_size=2, outputs=kinds,
                      targets=resolve(targets, photos))
    finally:
        runtime.close()
    assert len(calls) == 3  # 5 images in batches of 2
    assert len(list((tmp_path / "out").glob("*/*.png"))) == 15


def test_an_unwritable_name_stops_before_any_forward(checkpoint, tmp_path, run_cli):
    """#32: a tab (or another control character) in one stem used to fail after 16 masks;
    every such name is listed before anything is written."""
    names = [f"p{i:02d}.png" for i in range(20)] + ["a\tb.png", "line\nbreak.png", "del\x7f.png"]
    photos = _photos(tmp_path / "in", names=names)
    out = tmp_path / "out"
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--batch-size",
                   "1", "--workers", "0", str(photos))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "3 input images cannot name their output file" in done.stderr
    assert "control character" in done.stderr and "/a\\tb.png'" in done.stderr
    assert not out.exists()
    long = tmp_path / ("n" * 246 + ".png")  # a name of its own, too long with a kind added
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(long), "--save",
                   "mask,cutout", str(photos / "p00.png"))
    assert done.returncode == 2 and "longer than 255 bytes" in done.stderr, done.stderr
    assert not any(p.name.startswith("nnn") for p in tmp_path.iterdir())


def test_other_late_errors_come_first(checkpoint, tmp_path, run_cli):
    """Found from names, paths and headers before the checkpoint is read: a file that is no
    image in the folder (after 12 good ones), an --out under a file, a background file that
    is missing, a colour with a non-ASCII digit, a tint of two values."""
    photos = _photos(tmp_path / "in", 12)
    (photos / "zz_notes.jpg").write_text("not an image")
    out = tmp_path / "out"
    run = [("predict", "--checkpoint", checkpoint, "--batch-size", "1", "--workers", "0")]
    done = run_cli(*run[0], "--out", str(out), str(photos))
    assert done.returncode == 2 and "zz_notes.jpg is not an image" in done.stderr
    assert "--skip-bad" in done.stderr and not out.exists()
    skipped = run_cli(*run[0], "--out", str(out), "--skip-bad", str(photos))
    assert skipped.returncode == 0 and len(list(out.glob("*.png"))) == 12
    (tmp_path / "notes.txt").write_text("mine")
    for options, message in (
            (["--out", str(tmp_path / "notes.txt" / "masks")], "notes.txt is a file"),
            (["--out", str(tmp_path / "o2"), "--save", "cutout", "--background",
              str(tmp_path / "missing.png")], "image file"),
            (["--out", str(tmp_path / "o3"), "--save", "cutout", "--background", "²,1,1"],
             "--background '²,1,1': not a colour"),
            (["--out", str(tmp_path / "o4"), "--save", "overlay", "--tint", "1,2"],
             "--tint '1,2': give a colour name")):
        done = run_cli(*run[0], *options, str(photos / "photo0.png"))
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()


def test_it_says_what_it_will_do_then_shows_progress(checkpoint, tmp_path, run_cli):
    """#33: without a terminal (a log), the first line says what will happen, progress lines
    follow (after the first batch, then every 5 s, and at the end), then what was written."""
    photos = _photos(tmp_path / "in", 5)
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "out"),
                   "--batch-size", "2", str(photos))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"predicting 5 images with fpn/{TINY_BACKBONE} at 64 px on cpu (")
    assert "thread" in lines[0] and "batch 2 (given)" in lines[0], lines[0]
    progress = [line for line in lines if line.startswith("predicting: ")]
    assert progress[0].startswith("predicting: 2/5 images (40%), ")
    assert progress[-1].startswith("predicting: done, 5 images in ")
    assert " so far" in progress[0] and "eta" in progress[0]
    assert lines[-1] == f"wrote 5 masks to {tmp_path / 'out'}"


def test_workers_are_named_only_when_the_user_gave_them(checkpoint, tmp_path, run_cli):
    """#33 papercut: one image and no --workers printed '--workers 2: using 1'."""
    photo = str(_photos(tmp_path / "in", 1) / "photo0.png")
    quiet = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "a"), photo)
    assert quiet.returncode == 0 and "--workers" not in quiet.stderr, quiet.stderr
    said = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "b"),
                   "--workers", "2", photo)
    assert said.returncode == 0 and "--workers 2: using 1" in said.stderr, said.stderr
    assert "UserWarning" not in said.stderr + quiet.stderr


def test_backgrounds_blur_and_an_image_file(checkpoint, tmp_path, run_cli):
    photo = _photos(tmp_path / "in", 1) / "photo0.png"
    mask_run = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "m.png"),
                       str(photo))
    assert mask_run.returncode == 0, mask_run.stderr
    prob, rgb = read_mask(tmp_path / "m.png") / np.float32(255), read_image(photo)
    beach = tmp_path / "beach.png"
    cv2.imwrite(str(beach), np.random.default_rng(1).integers(0, 256, (10, 20, 3), np.uint8))
    for background, under in (("blur", "blur"), (str(beach), fitted(read_image(beach), 30, 40))):
        out = tmp_path / f"on_{Path(background).stem}.png"
        done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(out), "--save",
                       "cutout", "--background", background, str(photo))
        assert done.returncode == 0, done.stderr
        assert np.array_equal(read_image(out), cutout(rgb, prob, under))


def test_the_default_batch_follows_the_size_and_the_memory(checkpoint, tmp_path, run_cli,
                                                           monkeypatch):
    """#33: a batch of 8 whatever the size peaked at 7.7 GB for BiRefNet at 1024 px on the
    CPU. The first line says the batch chosen: 8 at 64 px, 4 at 512 px (the CPU's 1-megapixel
    rule), 1 where the memory allows no more; a batch given that does not fit, or one image
    that does not fit, is refused in one line naming what to lower (#32)."""
    monkeypatch.setenv("SODKIT_CACHE", str(tmp_path / "cache"))  # the probes' answers kept
    photo = str(_photos(tmp_path / "in", 1) / "photo0.png")
    base = ("predict", "--checkpoint", checkpoint, photo)
    small = run_cli(*base, "--out", str(tmp_path / "a"))  # no probe: 8 fit at 4 KiB a pixel
    assert "batch 8 (" in small.stderr and " available)" in small.stderr, small.stderr
    large = run_cli(*base, "--out", str(tmp_path / "b"), "--size", "512")
    assert large.returncode == 0 and "at 512 px" in large.stderr and "batch 4 (" in large.stderr
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "100")
    tight = run_cli(*base, "--out", str(tmp_path / "c"), "--size", "512")
    assert tight.returncode == 0 and "batch 1 (about " in tight.stderr, tight.stderr
    assert "MiB allowed)" in tight.stderr
    # the probe runs once for the file at 512 px: in the run whose budget needs it first (b
    # where the memory available is below about 17 GiB, else c), remembered after
    probe = "measuring one image's memory at 512 px to choose the batch"
    assert (large.stderr + tight.stderr).count(probe) == 1, (large.stderr, tight.stderr)
    given = run_cli(*base, "--out", str(tmp_path / "d"), "--size", "512", "--batch-size", "64")
    assert given.returncode == 2 and "--batch-size 64 at 512 px needs about" in given.stderr
    assert "lower --batch-size (1 needs about" in given.stderr and not (tmp_path / "d").exists()
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "1")
    none = run_cli(*base, "--out", str(tmp_path / "e"), "--size", "512")
    assert none.returncode == 2 and "one image at 512 px needs about" in none.stderr
    assert "lower the input side (--size)" in none.stderr and none.stderr.count("\n") == 1


def test_foreground_estimation_is_bounded_before_the_work(checkpoint, tmp_path, run_cli,
                                                          monkeypatch):
    """#32: pymatting's estimate costs 76-80 bytes a pixel; an image whose estimate exceeds the
    memory is refused before any forward pass, naming it and what to drop."""
    big = tmp_path / "in"
    big.mkdir()
    cv2.imwrite(str(big / "wide.png"), np.zeros((400, 500, 3), np.uint8))  # 0.2 MP: 15 MiB
    _photos(big, 2)
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "8")
    done = run_cli("predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "out"),
                   "--save", "cutout", "--estimate-foreground", str(big))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "foreground estimation of" in done.stderr and "wide.png (500x400" in done.stderr
    assert "drop --estimate-foreground" in done.stderr and not (tmp_path / "out").exists()


def test_cutouts_of_large_photos_take_smaller_batches(checkpoint, tmp_path, run_cli,
                                                      monkeypatch):
    """A cut-out keeps each photo at its own size in every batch in flight: the default batch
    counts them (here 3 batches with --workers 0: 12 MB a 1-megapixel photo) against the
    budget; a mask alone does not keep them."""
    photos = tmp_path / "in"
    photos.mkdir()
    for i in range(3):
        cv2.imwrite(str(photos / f"big{i}.png"), np.full((1000, 1000, 3), 60 * i, np.uint8))
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "40")
    monkeypatch.setenv("SODKIT_CACHE", str(tmp_path / "cache"))  # the probe's answer kept
    base = ("predict", "--checkpoint", checkpoint, "--workers", "0", str(photos))
    masks = run_cli(*base, "--out", str(tmp_path / "masks"))
    assert masks.returncode == 0 and "batch 8 (" in masks.stderr, masks.stderr
    cuts = run_cli(*base, "--out", str(tmp_path / "cuts"), "--save", "cutout")
    assert cuts.returncode == 0 and "batch 1 (about " in cuts.stderr, cuts.stderr
    per_image = float(re.search(r"batch 1 \(about ([\d.]+) MiB an image", cuts.stderr)[1])
    assert 12 * 1e6 / 2**20 <= per_image <= 14, per_image  # the 3 photos in flight, and more
    assert len(list((tmp_path / "cuts").glob("*.png"))) == 3
