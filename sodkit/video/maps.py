"""The Python API's videos: :meth:`sodkit.api.Model.predict_video`, a clip's probability maps
as an iterator, and, given ``out``, the clip's ``save`` kind written as it goes.

A video is a file (probed first: :func:`sodkit.video.read.probe`) or any iterable of frames,
each what ``Model.predict`` takes (an array, PIL image, tensor, path or bytes: uint8 RGB once
converted by :mod:`sodkit.image_input`), all of one size. The maps are those of
``sodkit predict`` for the same frames as images: its transform, forward and resize
(:mod:`sodkit.video.stream`). Everything that can be checked is checked at the call, before
the first frame is predicted; the work happens as the iterator is consumed, and ``out``
appears (renamed into place) when its last frame is in; an iterator dropped early leaves no
video file.

``out``: for ``mask``, ``binary`` or ``overlay`` a video file ``NAME.mkv`` (FFV1, lossless);
for ``cutout`` and ``soft`` (and any clip of odd width or height) a folder of PNG frames
(:mod:`sodkit.video.write`). Either follows ``sodkit predict``'s rules for its outputs
(:mod:`sodkit.outputs`): a file is replaced only where sodkit wrote it and nobody changed it
since, or with ``force``; a folder is new, empty or ``predict``'s own.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .read import VideoInfo
from .write import VIDEO_SUFFIX, frames_folder


class VideoMaps(Iterator[np.ndarray]):
    """The iterator ``predict_video`` returns: a frame's map at each step, and what the clip
    declares (``fps``, ``frames``: its count, 0 where not declared; ``height``, ``width``),
    known before the first frame. :meth:`close` stops early (no video file is left)."""

    def __init__(self, info: VideoInfo, maps: Iterator[np.ndarray]) -> None:
        self.info, self._maps = info, maps
        self.fps, self.frames = info.fps, info.frames
        self.height, self.width = info.height, info.width

    def __next__(self) -> np.ndarray:
        return next(self._maps)

    def close(self) -> None:
        close = getattr(self._maps, "close", None)
        if close is not None:
            close()


def video_maps(network: Any, video: Any, transform: Any, runtime: Any, batch: int,
               tta: Sequence[str], precision: str, out: str | Path | None = None,
               save: str = "mask", fps: float | None = None, force: bool = False
               ) -> VideoMaps:
    """Float32 (H, W) maps in [0, 1], one a frame, in order (module docstring); the checks
    run now, the frames are predicted as the iterator is consumed."""
    from ..inference.render import MODES, Rendering

    if save not in MODES:
        raise UserError(f"save={save!r}: choose one of {', '.join(MODES)}")
    info, frames = _source(video, fps, out is not None)
    writing = None
    if out is not None:
        writing = (_claimed(Path(out), save, info, force, video),
                   [(save, None if save == "mask" else Rendering(save))])
    return VideoMaps(info, _maps(network, frames, info, transform, runtime, batch, tta,
                                 precision, writing))


def _source(video: Any, fps: float | None, writes: bool
            ) -> tuple[VideoInfo, Iterator[np.ndarray]]:
    """``(info, frames)``: a file probed; an iterable's first frame read for its size."""
    from .read import frames, probe

    if isinstance(video, (str, Path)):
        if fps is not None:
            raise UserError("fps is the video file's own: give fps only with frames")
        info = probe(video)
        return info, frames(info)
    if isinstance(video, (bytes, np.ndarray)) or not isinstance(video, Iterable):
        raise UserError(f"video: give a video file's path or an iterable of frames, not "
                        f"{type(video).__name__}")
    if writes and (fps is None or not 0 < float(fps) <= 1000):
        raise UserError(f"fps={fps!r}: frames written to a video need their rate, a number "
                        f"in (0, 1000]")
    it = iter(video)
    first = next(it, None)
    if first is None:
        raise UserError("video: the frames are empty (no frame)")
    rgb = _frame(first, 0, None)
    info = VideoInfo(Path("frames"), 0, float(fps or 0.0), rgb.shape[0], rgb.shape[1])
    rest = (_frame(item, i, rgb.shape[:2]) for i, item in enumerate(it, 1))
    return info, itertools.chain([rgb], rest)


def _frame(item: Any, index: int, size: tuple[int, int] | None) -> np.ndarray:
    from ..image_input import image_of

    rgb = image_of(item, f"frame {index}")[0]
    if size is not None and rgb.shape[:2] != size:
        raise UserError(f"frame {index} is {rgb.shape[1]}x{rgb.shape[0]} pixels, not "
                        f"{size[1]}x{size[0]} as frame 0: a video's frames are of one size")
    return rgb


def _claimed(out: Path, save: str, info: VideoInfo, force: bool, video: Any
             ) -> tuple[Any, dict[str, Path]]:
    """The output folder to write through and ``{save: out}``, checked (module docstring)."""
    from ..outputs import claim, single_file

    inputs = [Path(video)] if isinstance(video, (str, Path)) else []
    if frames_folder(save, info):
        if out.suffix.lower() == VIDEO_SUFFIX:
            why = ("its size is odd: OpenCV writes even sizes only" if save in
                   ("mask", "binary", "overlay") else "no video codec keeps them")
            raise UserError(f"out={str(out)!r}: save={save!r} of this clip is written as PNG "
                            f"frames ({why}); give a folder")
        from ..paths import check_not_input

        check_not_input(out, inputs, "out")
        return claim(out, "predict", force=force, what="out"), {save: out}
    if out.suffix.lower() != VIDEO_SUFFIX:
        raise UserError(f"out={str(out)!r}: save={save!r} is written as a lossless video "
                        f"(FFV1): name it {out.with_suffix(VIDEO_SUFFIX).name}")
    single_file(out, "predict", force, "out", inputs, flag="force=True")
    if not out.parent.exists():
        claim(out.parent, "predict")
    return single_file(out, "predict", force, "out", inputs, flag="force=True"), {save: out}


def _maps(network: Any, frames: Iterator[np.ndarray], info: VideoInfo, transform: Any,
          runtime: Any, batch: int, tta: Sequence[str], precision: str,
          writing: tuple[Any, list] | None) -> Iterator[np.ndarray]:
    from ..inference.encode import output_arrays
    from ..inference.pipelines import postprocess_of
    from . import BEHIND
    from .stream import predict_stream
    from .write import Behind, open_outputs

    post, size = postprocess_of(transform), (info.height, info.width)

    def job(frame: np.ndarray, scores: Any, sinks: dict[str, Any]) -> Any:
        def write() -> None:
            for kind, array in output_arrays(post, scores, size, writing[1], frame):
                sinks[kind].write(array)
        return write

    with (open_outputs(writing[0][0], writing[0][1], info) if writing
          else contextlib.nullcontext({})) as sinks, Behind(BEHIND * batch) as behind:
        for frame, scores in predict_stream(network, frames, transform, runtime, batch, tta,
                                            precision):
            if writing:
                behind.put(job(frame, scores, sinks))
            yield post.probability_map(scores, size).float().cpu().numpy()
