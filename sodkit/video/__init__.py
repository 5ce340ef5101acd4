"""Videos in and out: a clip's frames predicted as a stream, its masks written as a video.

- :mod:`sodkit.video.read`: what a video file declares (frames, rate, size), checked before any
  work, and its frames decoded one at a time (uint8 RGB), each a one-line error naming the file;
- :mod:`sodkit.video.write`: where each ``--save`` kind of a clip goes and in what format
  (a lossless FFV1 video in Matroska for ``mask``, ``binary`` and ``overlay``; a folder of PNG
  frames for ``cutout``, whose alpha no video codec OpenCV writes keeps, and for ``soft``, whose
  16 bits none keeps);
- :mod:`sodkit.video.stream`: frames -> batches -> the network -> each frame's scores, with
  ``sodkit predict``'s transform, forward and resize: a frame's mask is the mask of the same
  frame given as an image.

Memory is bounded whatever the clip's length: one batch of decoded frames is held at a time,
each output frame is written as soon as it is made. Light on purpose (no cv2, no torch here):
``sodkit predict`` sorts its inputs with :func:`is_video` before it loads anything.
"""

from __future__ import annotations

from pathlib import Path

AHEAD, BEHIND = 2, 2  # batches of frames decoded ahead of the forward pass; waiting to be written
IN_FLIGHT = AHEAD + 1 + BEHIND  # batches of a clip's decoded frames in memory at most
VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mov", ".mkv", ".avi", ".webm", ".mpg", ".mpeg", ".wmv")


def is_video(path: str | Path) -> bool:
    """A video by its name (what ``sodkit predict`` streams instead of reading as an image)."""
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS
