"""Videos through ``sodkit predict`` and ``Model.predict_video`` (#37 item 2): a clip written
with OpenCV is predicted frame for frame as its frames saved as PNG images are, its outputs
keep the frame count and rate, and a hostile video is refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.imageio import read_mask

FPS = 10.0


def write_clip(path: Path, count: int = 8, size: tuple[int, int] = (48, 64),
               fourcc: str = "mp4v", fps: float = FPS) -> Path:
    """A moving disc on a gradient, ``count`` frames of ``size`` (H, W)."""
    height, width = size
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (width, height))
    assert writer.isOpened()
    base = np.linspace(0, 120, width, dtype=np.uint8)[None, :, None].repeat(height, 0)
    for i in range(count):
        frame = np.ascontiguousarray(base.repeat(3, 2))
        cv2.circle(frame, (8 + 5 * i % (width - 16), height // 2), height // 4,
                   (30, 200, 250), -1)
        writer.write(frame)
    writer.release()
    return path


def decoded(path: Path, grey: bool = False) -> tuple[list[np.ndarray], float]:
    """Every frame of a video as OpenCV decodes it (RGB, or its first channel), and its rate."""
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame[:, :, 0] if grey else cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    fps = capture.get(cv2.CAP_PROP_FPS)
    capture.release()
    return frames, fps


def as_pngs(frames: list[np.ndarray], folder: Path) -> Path:
    folder.mkdir(parents=True)
    for i, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:06d}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    return folder


@pytest.fixture
def checkpoint(trained) -> str:
    return str(trained / "checkpoints" / "last.pt")


def test_a_clip_gives_the_masks_of_its_frames_as_images(checkpoint, tmp_path, run_cli):
    """The mask video has the clip's frame count and rate and, read back, the masks of the
    same frames given as PNG images (to 1/255); the cut-outs are PNG frames of the same
    pixels as the images' cut-outs; the last lines say what was written where."""
    clip = write_clip(tmp_path / "clip.mp4")
    frames, _ = decoded(clip)
    stills = as_pngs(frames, tmp_path / "stills")
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                   str(tmp_path / "out"), "--save", "mask,cutout")
    assert done.returncode == 0, done.stderr
    assert "predicting 1 video (8 frames)" in done.stderr
    assert f"to {tmp_path / 'out' / 'mask' / 'clip.mkv'}" in done.stderr.splitlines()[-1]
    ref = run_cli("predict", "--checkpoint", checkpoint, str(stills), "--out",
                  str(tmp_path / "ref"), "--save", "mask,cutout")
    assert ref.returncode == 0, ref.stderr
    masks, fps = decoded(tmp_path / "out" / "mask" / "clip.mkv", grey=True)
    assert len(masks) == 8 and fps == FPS
    cutouts = sorted((tmp_path / "out" / "cutout" / "clip").glob("*.png"))
    assert [p.name for p in cutouts] == [f"{i:06d}.png" for i in range(8)]
    for i, (mask, cut) in enumerate(zip(masks, cutouts, strict=True)):
        expected = read_mask(tmp_path / "ref" / "mask" / f"{i:06d}.png").astype(int)
        assert np.abs(mask.astype(int) - expected).max() <= 1
        rgba = cv2.imread(str(cut), cv2.IMREAD_UNCHANGED)
        want = cv2.imread(str(tmp_path / "ref" / "cutout" / f"{i:06d}.png"), cv2.IMREAD_UNCHANGED)
        assert np.abs(rgba.astype(int) - want.astype(int)).max() <= 1
    assert masks[0].std() > 0  # not a constant: the comparison means something


def test_a_stream_that_does_not_say_its_frame_count(checkpoint, tmp_path, run_cli):
    """FFmpeg reads a PNG named ``.mp4`` as a one-frame stream of no declared count (as a
    live recording may be): predicted to its end, said so."""
    still = tmp_path / "still.mp4"
    cv2.imwrite(str(tmp_path / "still.png"), np.full((24, 32, 3), 120, np.uint8))
    (tmp_path / "still.png").rename(still)
    done = run_cli("predict", "--checkpoint", checkpoint, str(still), "--out",
                   str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "predicting 1 video (frame count not declared)" in done.stderr
    assert len(decoded(tmp_path / "out" / "still.mkv")[0]) == 1


def test_images_and_videos_in_one_call(checkpoint, tmp_path, run_cli):
    """Images first, then each video; one folder, names that do not collide."""
    clip = write_clip(tmp_path / "in" / "clip.avi", count=3, fourcc="FFV1")
    cv2.imwrite(str(tmp_path / "in" / "photo.png"), np.full((20, 30, 3), 90, np.uint8))
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip),
                   str(tmp_path / "in" / "photo.png"), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "predicting 1 image and 1 video (3 frames)" in done.stderr
    assert read_mask(tmp_path / "out" / "photo.png").shape == (20, 30)
    assert len(decoded(tmp_path / "out" / "clip.mkv")[0]) == 3
    again = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                    str(tmp_path / "out"))  # sodkit's own file: replaced
    assert again.returncode == 0, again.stderr


def test_the_api_streams_the_maps_of_the_frames(checkpoint, tmp_path):
    """``predict_video`` yields each frame's map, equal to ``predict`` of the frame as an
    image (to 1/255); with ``out`` it writes the mask video; frames given as arrays work
    too, with their rate."""
    import sodkit

    model = sodkit.load(checkpoint, device="cpu")
    clip = write_clip(tmp_path / "clip.mp4", count=5)
    frames, _ = decoded(clip)
    stills = as_pngs(frames, tmp_path / "stills")
    stream = model.predict_video(clip, out=tmp_path / "m.mkv", batch_size=2)
    assert (stream.fps, stream.frames, stream.height, stream.width) == (FPS, 5, 48, 64)
    maps = list(stream)
    expected = model.predict(sorted(str(p) for p in stills.iterdir()))
    assert len(maps) == 5
    for got, want in zip(maps, expected, strict=True):
        assert got.shape == (48, 64) and np.abs(got - want).max() <= 1 / 255
    written, fps = decoded(tmp_path / "m.mkv", grey=True)
    assert len(written) == 5 and fps == FPS
    assert np.abs(written[2].astype(int) - np.round(maps[2] * 255)).max() <= 1
    again = list(model.predict_video(clip, out=tmp_path / "m.mkv", batch_size=3))
    assert np.abs(again[3] - maps[3]).max() <= 1 / 255  # its own file: replaced
    from_arrays = list(model.predict_video(iter(frames), out=tmp_path / "a.mkv", fps=7.5))
    assert np.abs(from_arrays[4] - maps[4]).max() <= 1 / 255
    assert decoded(tmp_path / "a.mkv")[1] == 7.5
    abandoned = model.predict_video(clip, out=tmp_path / "gone.mkv")
    next(abandoned)
    abandoned.close()
    assert not (tmp_path / "gone.mkv").exists()
    with pytest.raises(sodkit.errors.UserError, match="need their rate"):
        model.predict_video(frames, out=tmp_path / "b.mkv")
    with pytest.raises(sodkit.errors.UserError, match=r"name it b\.mkv"):
        model.predict_video(clip, out=tmp_path / "b.mp4")


def claiming_frames(path: Path, count: int) -> Path:
    """An AVI whose headers (``avih`` and ``strh``) declare ``count`` frames."""
    import struct

    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, data.index(b"avih") + 24, count)  # dwTotalFrames
    struct.pack_into("<I", data, data.index(b"strh") + 40, count)  # dwLength
    path.write_bytes(bytes(data))
    return path


def test_a_header_claiming_two_billion_frames_costs_nothing_first(checkpoint, tmp_path,
                                                                 run_cli):
    """The outputs are checked from the files on disk, not a path per declared frame; the
    stream's end is then one line naming both counts, and no video file is left."""
    clip = claiming_frames(write_clip(tmp_path / "liar.avi", count=3, fourcc="FFV1"),
                           2**31 - 1)
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                   str(tmp_path / "out"), "--save", "mask,cutout")
    assert done.returncode == 2, done.stderr
    assert "declares 2147483647 frames but only 3 could be decoded" in done.stderr
    assert not (tmp_path / "out" / "mask" / "liar.mkv").exists()


def _hostile(tmp_path: Path) -> dict[str, Path]:
    """Videos that are not: each with the words its one-line error must hold."""
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "text.mp4").write_text("not a video\n")
    empty = cv2.VideoWriter(str(bad / "empty.avi"), cv2.VideoWriter_fourcc(*"FFV1"), 10.0,
                            (16, 16))
    empty.release()
    whole = write_clip(bad / "whole.avi", count=30, fourcc="FFV1").read_bytes()
    (bad / "cut.avi").write_bytes(whole[: len(whole) * 2 // 3])
    (bad / "whole.avi").unlink()
    write_clip(bad / "huge.avi", count=2, fourcc="FFV1")  # under SODKIT_MAX_PIXELS=100
    return {"text.mp4": "cannot read video file",
            "empty.avi": "holds no frame that can be decoded",
            "cut.avi": "could be decoded (truncated or damaged)",
            "huge.avi": "megapixels"}


def test_hostile_videos_are_refused_in_one_line_naming_them(checkpoint, tmp_path, run_cli,
                                                            monkeypatch):
    for name, words in _hostile(tmp_path).items():
        path = tmp_path / "bad" / name
        if name == "huge.avi":
            monkeypatch.setenv("SODKIT_MAX_PIXELS", "100")
        out = tmp_path / f"out-{path.stem}"
        done = run_cli("predict", "--checkpoint", checkpoint, str(path), "--out", str(out))
        monkeypatch.delenv("SODKIT_MAX_PIXELS", raising=False)
        assert done.returncode == 2, (name, done.stderr)
        last = done.stderr.strip().splitlines()[-1]
        assert str(path) in last and words in last, (name, done.stderr)
        assert "@ 0x" not in done.stderr, done.stderr  # no line of FFmpeg's own
        if name != "cut.avi":  # refused before any work: one line
            assert done.stderr.count("\n") == 1, done.stderr
        assert not list(out.glob("*.mkv")), name  # no video, whole or half


def test_videos_are_refused_where_their_outputs_cannot_go(checkpoint, tmp_path, run_cli):
    clip = write_clip(tmp_path / "clip.mp4", count=2)
    for out in ("masks.png", "masks.mkv"):
        done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                       str(tmp_path / out))
        assert done.returncode == 2 and "go into a folder" in done.stderr, done.stderr
    marker = write_clip(tmp_path / ".sodkit-run.mp4", count=2)  # frames: a folder by that name
    done = run_cli("predict", "--checkpoint", checkpoint, str(marker), "--out",
                   str(tmp_path / "o"), "--save", "cutout")
    assert done.returncode == 2 and "keeps for its own files" in done.stderr, done.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "clip.mkv").write_bytes(b"the user's")  # not sodkit's: kept, even in its folder
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out", str(mine),
                   "--force")
    assert done.returncode == 0, done.stderr  # --force: the user's folder, its names replaced
    out = tmp_path / "out"
    assert run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                   str(out)).returncode == 0
    (out / "clip.mkv").write_bytes(b"edited")
    refused = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out", str(out))
    assert refused.returncode == 2 and "changed" in refused.stderr
    assert (out / "clip.mkv").read_bytes() == b"edited"


_RSS = """
import sys, cv2, sodkit
model = sodkit.load(sys.argv[1], device="cpu", size=32)
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
seen = []
for i, _ in enumerate(model.predict_video(sys.argv[2], out=sys.argv[3], batch_size=4)):
    if i in (40, 239):
        seen.append(rss())
print(seen[1] - seen[0])
"""


@pytest.mark.slow  # a fresh process streams 240 frames: seconds
def test_memory_stays_flat_over_a_long_clip(checkpoint, tmp_path):
    """240 frames of 320x240 streamed into a mask video: the resident memory after frame 40
    and after the last differ by less than 16 MiB, where keeping each decoded frame would add
    44 MiB (and each map 58 MiB; measured over 360: 0.7 MiB, 105 MiB keeping the maps)."""
    import subprocess
    import sys

    clip = write_clip(tmp_path / "long.avi", count=240, size=(240, 320), fourcc="FFV1")
    done = subprocess.run([sys.executable, "-c", _RSS, checkpoint, str(clip),
                           str(tmp_path / "long.mkv")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 16 << 20, done.stdout
    assert len(decoded(tmp_path / "long.mkv")[0]) == 240


def test_stale_frames_and_skip_bad(checkpoint, tmp_path, run_cli):
    """A shorter clip of the same name removes the PNG frames sodkit wrote for the longer one
    and keeps one the user changed; ``--skip-bad`` leaves out a video that is none and lists
    it."""
    clip = write_clip(tmp_path / "in" / "clip.avi", count=5, fourcc="FFV1")
    out = tmp_path / "out"
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out", str(out),
                   "--save", "soft")
    assert done.returncode == 0, done.stderr
    frames = sorted((out / "clip").glob("*.png"))
    assert len(frames) == 5 and cv2.imread(str(frames[0]), -1).dtype == np.uint16
    (out / "clip" / "000004.png").write_bytes(frames[3].read_bytes())  # the user's now
    write_clip(clip, count=2, fourcc="FFV1")
    (tmp_path / "in" / "broken.mp4").write_bytes(b"\0" * 100)
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip),
                   str(tmp_path / "in" / "broken.mp4"), "--out", str(out), "--save", "soft",
                   "--skip-bad")
    assert done.returncode == 0, done.stderr
    assert "left out the video" in done.stderr and "broken.mp4" in done.stderr
    assert [p.name for p in sorted((out / "clip").glob("*.png"))] == [
        "000000.png", "000001.png", "000004.png"]  # 2 and 3 were sodkit's: removed
    assert "1 frame beyond this clip's 2 is left from before" in done.stderr


def test_frames_of_odd_size_go_to_png_frames(checkpoint, tmp_path):
    """OpenCV's FFmpeg writer crops odd sizes to even: such frames are PNG files instead."""
    import sodkit

    model = sodkit.load(checkpoint, device="cpu")
    frames = [np.full((31, 45, 3), 40 * i, np.uint8) for i in range(3)]
    with pytest.raises(sodkit.errors.UserError, match="its size is odd"):
        model.predict_video(frames, out=tmp_path / "odd.mkv", fps=5)
    maps = list(model.predict_video(frames, out=tmp_path / "odd", fps=5))
    written = sorted((tmp_path / "odd").glob("*.png"))
    assert len(written) == 3 and read_mask(written[2]).shape == (31, 45)
    assert np.abs(read_mask(written[2]) - np.round(maps[2] * 255)).max() <= 1


def rotated(path: Path) -> Path:
    """An mp4v clip whose track matrix says "rotate by 90 degrees", as a phone held upright
    writes it (the 36-byte matrix of the ``tkhd`` box, version 0, patched in place)."""
    import struct

    data = bytearray(path.read_bytes())
    box = data.index(b"tkhd") - 4
    assert data[box + 8] == 0  # version 0: the matrix at byte 48 of the box
    struct.pack_into(">9i", data, box + 48, 0, 0x10000, 0, -0x10000, 0, 0, 0, 0, 0x40000000)
    path.write_bytes(bytes(data))
    return path


def test_a_rotated_clip_is_predicted_upright(checkpoint, tmp_path, run_cli):
    """OpenCV applies a clip's rotation: its frames, and so its masks, are 64x48 (H x W)."""
    clip = rotated(write_clip(tmp_path / "phone.mp4", count=3))
    frames, _ = decoded(clip)
    assert frames[0].shape == (64, 48, 3)
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                   str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    masks, fps = decoded(tmp_path / "out" / "phone.mkv", grey=True)
    assert len(masks) == 3 and masks[0].shape == (64, 48) and fps == FPS


def test_a_folder_gives_its_images_and_says_it_leaves_its_videos(checkpoint, tmp_path,
                                                                 run_cli):
    """A folder's videos are not taken (a stray clip among photos): said, in one line."""
    write_clip(tmp_path / "only" / "clip.mp4", count=2)
    done = run_cli("predict", "--checkpoint", checkpoint, str(tmp_path / "only"), "--out",
                   str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "the 1 video there is predicted only when named" in done.stderr
    cv2.imwrite(str(tmp_path / "only" / "a.png"), np.zeros((8, 8, 3), np.uint8))
    done = run_cli("predict", "--checkpoint", checkpoint, str(tmp_path / "only"), "--out",
                   str(tmp_path / "out"))
    assert done.returncode == 0 and "1 video left out" in done.stderr, done.stderr


def test_the_default_batch_counts_the_frames_in_flight(checkpoint, tmp_path, run_cli,
                                                       monkeypatch):
    """Five batches of a clip's frames may be in memory (two decoded ahead, one predicted, two
    waiting to be written): the default batch counts them, 1280x720 frames at 2.6 MiB each."""
    clip = write_clip(tmp_path / "hd.avi", count=2, size=(720, 1280), fourcc="FFV1")
    monkeypatch.setenv("SODKIT_MAX_MEMORY_MB", "60")
    done = run_cli("predict", "--checkpoint", checkpoint, str(clip), "--out",
                   str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "batch 1 (about" in done.stderr and "60 MiB allowed" in done.stderr, done.stderr
