"""``sodkit predict clip.mp4 --out DIR``: each video's frames predicted as a stream.

A video is named on the command line (a folder's videos are not taken: a stray clip in a folder
of photos would cost more than all of them); images and videos mix in one call, the images
first. Before any forward pass each video is probed (:func:`sodkit.video.read.probe`: readable,
frames, a frame rate, pixels within ``SODKIT_MAX_PIXELS``; one line naming the file, or with
``--skip-bad`` left out and listed) and its outputs are checked like an image's
(:mod:`sodkit.outputs`): ``DIR/<stem>.mkv`` for a video kind, ``DIR/<stem>/NNNNNN.png`` for
frames (:mod:`sodkit.video.write`), ``DIR/<kind>/...`` with several kinds. ``--out NAME.png``
(one image's file) and ``--out NAME.mkv`` are refused for videos: their outputs go into a
folder. Under torchrun videos are refused: one process streams a clip.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import DataError, UserError

if TYPE_CHECKING:
    from ..inference.encode import Outputs
    from ..outputs import OutputFolder
    from ..predict_plan import Targets
    from ..video.read import VideoInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Clip:
    """One video to predict: what it declares and each kind's output (file or folder)."""

    info: VideoInfo
    outputs: dict[str, Path]

    def files(self) -> list[Path]:
        """Every path it will write that exists now (a video file; a folder's frames as
        found on disk), for the checks first."""
        from ..video.write import existing_frames, frames_folder

        return [p for kind, out in self.outputs.items() for p in (
            existing_frames(out, self.info.frames) if frames_folder(kind, self.info)
            else [out])]


def split_inputs(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """``(images, videos)`` of the inputs, by their names."""
    from ..video import is_video

    return ([p for p in paths if not is_video(p)], [p for p in paths if is_video(p)])


def plan_clips(targets: Targets, videos: Sequence[Path], skip_bad: bool) -> list[Clip]:
    """Each video probed and its outputs placed (module docstring); nothing is created."""
    from ..paths import inside
    from ..video import is_video
    from ..video.read import probe
    from ..video.write import output_path

    if not videos:
        return []
    if targets.single or is_video(targets.out):
        raise UserError(f"--out {targets.out}: a video's outputs (a video or a folder of "
                        f"frames for each) go into a folder; give --out DIR")
    clips, bad = [], []
    for video in videos:
        try:
            info = probe(video)
        except DataError as exc:
            if not skip_bad:
                raise DataError(f"{exc} (or give --skip-bad to write the other inputs' "
                                f"outputs)") from None
            bad.append(f"{video} ({exc})")
            continue
        sub = len(targets.kinds) > 1
        outputs = {kind: output_path(targets.path(video.stem, kind), kind, info)
                   for kind in targets.kinds}
        if any(path.name.casefold().startswith(".sodkit") for path in outputs.values()):
            raise UserError(f"{video}: its outputs would be named {video.stem}, which sodkit "
                            f"keeps for its own files (.sodkit-run, .sodkit-files); rename it")
        clips.append(Clip(info, {kind: inside(targets.out, *([kind] if sub else []), path.name)
                                 for kind, path in outputs.items()}))
    for line in bad:
        logger.warning("left out the video %s", line)
    return clips


def check_clips(clips: Sequence[Clip]) -> None:
    """Before any work: no clip's output is a file where a folder of frames goes (whether
    each file may be replaced is checked with the images': ``Clip.files``)."""
    from ..video.write import frames_folder

    for clip in clips:
        for kind, out in clip.outputs.items():
            if frames_folder(kind, clip.info) and out.exists() and not out.is_dir():
                raise UserError(f"--out: {out} is a file; the frames of {clip.info.path} go "
                                f"into a folder of that name")


def describe(images: int, clips: Sequence[Clip]) -> str:
    """``3 images and 2 videos (480 frames)``, for the opening line (``1 video (frame count
    not declared)`` for a stream that does not say how many frames it holds)."""
    from ..text import and_list, plural

    parts = [plural(images, "image")] if images or not clips else []
    if clips:
        frames = sum(clip.info.frames for clip in clips)
        unknown = sum(1 for clip in clips if clip.info.frames == 0)  # a count not declared
        counts = (plural(frames, "frame") + (f", and {unknown} of no declared count"
                                              if unknown else "")
                  if unknown < len(clips) else
                  f"frame count{'s' if unknown > 1 else ''} not declared")
        parts.append(f"{plural(len(clips), 'video')} ({counts})")
    return and_list(parts)


def refuse_distributed(clips: Sequence[Clip], runtime: Any) -> None:
    """Videos under torchrun: refused before any work (one process streams a clip)."""
    if clips and runtime.world_size > 1:
        raise UserError("videos are predicted by one process: run sodkit predict without "
                        "torchrun for them")


def predict_clips(model: Any, clips: Sequence[Clip], transform: Any, runtime: Any,
                  folder: OutputFolder, batch: int, tta: Sequence[str],
                  outputs: Outputs, precision: str = "fp32") -> None:
    """Stream each clip through the network into its outputs, a progress bar (frames/s, ETA)
    each; a last line each naming what was written."""
    from ..inference.render import NOUNS
    from ..text import and_list, plural
    from ..video.write import frames_folder

    for clip in clips:
        count = _predict_clip(model, clip, transform, runtime, folder, batch, tta, outputs,
                              precision)
        logger.info("wrote %s of %s to %s", and_list(
            [plural(count, NOUNS[kind] + " frame") for kind, _ in outputs]), clip.info.path,
            and_list([str(path) + ("/" if frames_folder(kind, clip.info) else "")
                      for kind, path in clip.outputs.items()]))


def _predict_clip(model: Any, clip: Clip, transform: Any, runtime: Any, folder: OutputFolder,
                  batch: int, tta: Sequence[str], outputs: Outputs, precision: str) -> int:
    from ..inference.encode import output_arrays
    from ..inference.pipelines import postprocess_of
    from ..progress import Progress
    from ..video import BEHIND
    from ..video.read import frames
    from ..video.stream import predict_stream
    from ..video.write import Behind, open_outputs

    post, info = postprocess_of(transform), clip.info
    size, done = (info.height, info.width), 0

    def job(frame: Any, scores: Any, sinks: dict[str, Any]) -> Callable[[], None]:
        def write() -> None:
            for kind, array in output_arrays(post, scores, size, outputs, frame):
                sinks[kind].write(array)
        return write

    with open_outputs(folder, clip.outputs, info) as sinks, Progress(
            info.frames or None, f"predicting {info.path.name}", unit="frame", log=logger,
            early=True) as shown, Behind(BEHIND * batch) as behind:
        for frame, scores in predict_stream(model, frames(info), transform, runtime, batch,
                                            tta, precision):
            behind.put(job(frame, scores, sinks))
            done += 1
            if done % batch == 0:  # the rate counts a batch at once, as it is predicted
                shown.update(batch)
        shown.update(done % batch)
    return done
