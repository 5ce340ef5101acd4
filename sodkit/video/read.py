"""A video file read as a stream of uint8 RGB frames, after what it declares is checked.

Every video may be hostile: a file that is no video, a truncated one, one without frames,
one declaring a frame of a billion pixels or no frame rate. :func:`probe` opens it with
FFmpeg (never OpenCV's image-sequence reader, which would take a PNG named ``clip.mp4``) and
refuses each in one line naming the file, before any forward pass; :func:`frames` then decodes
one frame at a time and refuses, in one line, a stream that ends before the count its header
declares or holds a frame of another size (the output written so far is discarded by the
writer: :mod:`sodkit.video.write`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ..errors import DataError
from ..limits import check_pixels

MAX_FPS = 1000.0  # a rate above this is a damaged header, not a camera


@dataclass(frozen=True)
class VideoInfo:
    """What a video declares: ``frames`` (its container's count; 0 where it does not say, as
    a stream recorded live may not), ``fps``; ``height`` and ``width`` of every frame as
    decoded (its first frame's)."""

    path: Path
    frames: int
    fps: float
    height: int
    width: int

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


def _open(path: Path) -> cv2.VideoCapture:
    if not path.is_file():
        raise DataError(f"video file not found: {path}")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise DataError(f"cannot read video file {path}: {exc.strerror or exc}") from None
    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    if not capture.isOpened():
        capture.release()
        raise DataError(f"cannot read video file {path}: not a video FFmpeg (through OpenCV) "
                        f"can decode, or a damaged one; replace or remove it")
    return capture


def probe(path: str | Path) -> VideoInfo:
    """The :class:`VideoInfo` of ``path``, checked: a video FFmpeg opens, whose first frame
    decodes, a frame rate in (0, :data:`MAX_FPS`], and frames within ``SODKIT_MAX_PIXELS`` (by
    the header, before the first frame is decoded for its size).

    Raises:
        DataError: one line naming the file and what is wrong.
    """
    path = Path(path)
    capture = _open(path)
    try:
        count = capture.get(cv2.CAP_PROP_FRAME_COUNT)
        fps = capture.get(cv2.CAP_PROP_FPS)
        width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
        height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    finally:
        capture.release()
    if not math.isfinite(fps) or not 0 < fps <= MAX_FPS:
        raise DataError(f"video file {path} declares no valid frame rate ({fps:g} frames/s); "
                        f"re-encode it (e.g. ffmpeg -i IN -r 25 OUT.mp4) or remove it")
    if width < 1 or height < 1:
        raise DataError(f"video file {path} declares frames of {width}x{height} pixels; "
                        f"replace or remove it")
    check_pixels(path, width, height)
    height, width = _first_frame_size(path)  # as decoded: a phone's rotation applied
    known = math.isfinite(count) and count >= 1  # a stream recorded live may not say
    return VideoInfo(path, int(count) if known else 0, float(fps), height, width)


def _first_frame_size(path: Path) -> tuple[int, int]:
    """``(height, width)`` of the first frame as OpenCV decodes it: a clip whose metadata
    rotates it (a phone held upright) declares 1920x1080 and decodes 1080x1920 (OpenCV
    applies the rotation), which every frame and output then has."""
    capture = _open(path)
    try:
        ok, frame = capture.read()
    finally:
        capture.release()
    if not ok or frame is None:
        raise DataError(f"video file {path} holds no frame that can be decoded (empty, "
                        f"damaged, or a codec this FFmpeg lacks); replace or remove it")
    return frame.shape[0], frame.shape[1]


def frames(info: VideoInfo) -> Iterator[np.ndarray]:
    """The frames of ``info.path`` in order, each uint8 RGB (H, W, 3), decoded one at a time.

    Raises:
        DataError: the stream ends before ``info.frames`` frames (truncated or damaged), or a
            frame is not of the first's size.
    """
    capture = _open(info.path)
    done = 0
    try:
        while True:
            ok, frame = capture.read()
            if not ok or frame is None:
                break
            if frame.shape[:2] != (info.height, info.width):
                raise DataError(f"video file {info.path}: frame {done} is {frame.shape[1]}x"
                                f"{frame.shape[0]} pixels, not {info.width}x{info.height} "
                                f"as the first; replace or remove it")
            done += 1
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB if frame.ndim == 3 and
                               frame.shape[2] == 3 else cv2.COLOR_GRAY2RGB)
    finally:
        capture.release()
    if done < info.frames:  # 0: the count is not known, the stream's end is the end
        raise DataError(f"video file {info.path}: declares {info.frames} frames but only "
                        f"{done} could be decoded (truncated or damaged); replace or "
                        f"remove it")
