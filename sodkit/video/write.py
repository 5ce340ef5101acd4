"""Where each ``--save`` kind of a clip goes, and in what format, written frame by frame.

Measured with the OpenCV sodkit depends on (opencv-python-headless 4.x, its FFmpeg):

* FFV1 in Matroska (``.mkv``) reads back bit for bit, grey and colour: ``mask`` (uint8 grey),
  ``binary`` and ``overlay`` (RGB) are such a video, ``<stem>.mkv``, at the clip's frame rate
  and count. (mp4v in ``.mp4`` changes a mask by up to 9/255 a pixel, MJPG by up to 18: no
  lossy codec is used.)
* No codec OpenCV writes keeps an alpha channel, nor 16 bits: ``cutout`` (RGBA) and ``soft``
  (16-bit) are a folder of PNG frames, ``<stem>/000000.png``, ``000001.png``, ..., with the
  same pixels ``sodkit predict`` writes for an image.
* OpenCV's FFmpeg writer crops a frame of odd width or height to even: such a clip's outputs
  are PNG frames too, whatever the kind (said in the log).

A video file is written to a hidden temporary file beside its name and renamed into place when
the last frame is in (:meth:`sodkit.outputs.OutputFolder.writing`: recorded as
``predict``'s, an existing file replaced only by the rules of :mod:`sodkit.outputs`); a clip
that fails midway leaves no video. PNG frames are written one by one through the same folder;
frames left from an earlier, longer clip of the same name are removed when sodkit wrote them
and nobody changed them since (else they stay, and the log says so).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from ..inference.render import encode_png

if TYPE_CHECKING:
    from ..outputs import OutputFolder
    from .read import VideoInfo

logger = logging.getLogger(__name__)

VIDEO_SUFFIX = ".mkv"
FOURCC = "FFV1"  # lossless; read back bit for bit (grey and colour)
VIDEO_KINDS = ("mask", "binary", "overlay")  # a video file; the other kinds: PNG frames
MIN_DIGITS = 6


def frames_folder(kind: str, info: VideoInfo) -> bool:
    """Whether ``kind``'s output of the clip is a folder of PNG frames (not a video file)."""
    return kind not in VIDEO_KINDS or info.width % 2 == 1 or info.height % 2 == 1


def output_path(png: Path, kind: str, info: VideoInfo) -> Path:
    """A clip's output for ``kind`` from the path its image would have (``DIR/<stem>.png``):
    ``DIR/<stem>.mkv`` or the folder ``DIR/<stem>/``."""
    return png.with_suffix("") if frames_folder(kind, info) else png.with_suffix(VIDEO_SUFFIX)


def frame_name(index: int, count: int) -> str:
    """``000042.png``: names that sort in frame order (more digits for a longer clip)."""
    return f"{index:0{max(MIN_DIGITS, len(str(max(count - 1, 0))))}d}.png"


def existing_frames(folder: Path, count: int) -> list[Path]:
    """The files in ``folder`` that writing ``count`` frames would replace (``count`` 0: not
    declared, any frame name): found on disk, not enumerated from the count, which a header
    may give as a trillion."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.png") if p.stem.isdigit()
                  and p.name == frame_name(int(p.stem), count)
                  and (count == 0 or int(p.stem) < count))


class VideoFile:
    """A lossless (FFV1) video being written to ``path`` (a temporary file: the caller renames
    it), grey or RGB frames of ``height`` x ``width`` at ``fps``."""

    def __init__(self, path: Path, fps: float, height: int, width: int, colour: bool) -> None:
        self.path, self.colour, self.count = path, colour, 0
        self.writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*FOURCC), fps,
                                      (width, height), colour)
        if not self.writer.isOpened():
            raise OSError(f"OpenCV cannot write an {FOURCC} video of {width}x{height} pixels")

    def write(self, array: np.ndarray) -> None:
        if self.colour:
            array = cv2.cvtColor(np.ascontiguousarray(array), cv2.COLOR_RGB2BGR)
        self.writer.write(np.ascontiguousarray(array))
        self.count += 1

    def close(self) -> None:
        self.writer.release()


class FrameFiles:
    """PNG frames ``000000.png``, ... in ``root``, each written through the output folder."""

    def __init__(self, folder: OutputFolder, root: Path, count: int) -> None:
        self.folder, self.root, self.declared, self.count = folder, root, count, 0

    def write(self, array: np.ndarray) -> None:
        self.folder.write_bytes(self.root / frame_name(self.count, self.declared),
                                encode_png(array))
        self.count += 1

    def close(self) -> None:
        """Frames of an earlier, longer clip beyond this one's last: removed where sodkit
        wrote them and they are unchanged, else left and said."""
        stale = sorted(p for p in self.root.glob("*.png") if p.stem.isdigit()
                       and int(p.stem) >= self.count and p.name == frame_name(int(p.stem),
                                                                               self.declared))
        kept = [p for p in stale if not _remove_own(self.folder, p)]
        if kept:
            from ..text import noun_for, plural

            logger.warning("%s: %s beyond this clip's %d %s left from before (not written by "
                           "sodkit predict, or changed since)", self.root,
                           plural(len(kept), "frame"), self.count, noun_for(len(kept), "is"))


def _remove_own(folder: OutputFolder, path: Path) -> bool:
    if folder.record is None or not folder.record.proves(folder.rel(path), path):
        return False
    path.unlink()
    return True


Sinks = dict[str, Any]  # kind -> VideoFile | FrameFiles


class Behind:
    """Each frame's output work (the resize back, the rendering, the encoding, the write) in
    one thread beside the next batch's forward pass, as :mod:`sodkit.engine.overlap` does for
    images: in order, one job at a time, at most ``depth`` waiting (a slower writer holds the
    loop back instead of piling up frames). A job's error is raised at the next :meth:`put`
    or on leaving; leaving on an error cancels the jobs not started and waits for the one
    running, so the writers are closed after their last write."""

    def __init__(self, depth: int) -> None:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        self.depth = max(1, depth)
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="sodkit-video")
        self.pending: deque = deque()

    def put(self, job: Callable[[], None]) -> None:
        self.pending.append(self.pool.submit(job))
        while len(self.pending) > self.depth:
            self.pending.popleft().result()

    def __enter__(self) -> Behind:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            while kind is None and self.pending:
                self.pending.popleft().result()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


@contextlib.contextmanager
def open_outputs(folder: OutputFolder, paths: dict[str, Path], info: VideoInfo
                 ) -> Iterator[Sinks]:
    """A writer for each kind's output of ``paths`` (from :func:`output_path`), for the block
    to write every frame to; the video files are renamed into place when it ends, and
    discarded when it raises (or a generator holding it is closed early)."""
    with contextlib.ExitStack() as stack:
        sinks: Sinks = {}
        for kind, path in paths.items():
            if frames_folder(kind, info):
                sinks[kind] = FrameFiles(folder, path, info.frames)
                continue
            tmp = stack.enter_context(folder.writing(path))
            sinks[kind] = VideoFile(tmp, info.fps, info.height, info.width, kind == "overlay")
            stack.callback(sinks[kind].close)  # before its rename (last in, first out)
        yield sinks
        for sink in sinks.values():
            if isinstance(sink, FrameFiles):
                sink.close()
