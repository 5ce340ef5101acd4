"""Temporal stability of a video's masks: how much a prediction flickers where the truth holds
still (``sodkit eval --groups --compute Flicker``).

Definition, for the consecutive kept frames t-1, t of one group (a video), P the prediction and
G the GT as uint8 maps at the GT's size (the prediction resized as every metric reads it)::

    S_t       = { pixels x : G_t(x) == G_{t-1}(x) }            (the truth did not change)
    Flicker_t = mean over x in S_t of |P_t(x) - P_{t-1}(x)| / 255

and a video's Flicker is the mean of Flicker_t over its frame pairs (each pair weighs alike, as
MAE weighs images); the dataset's, as every metric of ``--groups``, the mean over videos. 0 is
a prediction that changes only where the truth changes (the GT itself scores 0); 1 is a mask
that turns from all white to all black where nothing moved. It is an error: lower is better.

Why the GT and not the image: ``sodkit eval`` sees predictions and GTs, not always the frames
(``--images`` is optional), and a still image region can hold a moving object boundary when the
camera is still but the lighting flickers; the GT says where the answer changed, which is what a
mask should follow. Restricting to the pixels where the GT holds still leaves out the change a
moving object justly causes; what a model does wrong where the object moves is MAE's to count.

A frame pair where the GT changes at every pixel has no such pixel: it is left out (its row's
weight is 0), as is each video's first frame. A video of one frame has no Flicker (NaN), and is
left out of the dataset's mean.

A frame's row is ``(w_t * Flicker_t, w_t)``, ``w_t`` 1 where the frame has a previous one and
S_t is not empty, else ``(0, 0)``: the ratio of the column sums is the mean over the frames
that count, and so is the ratio of the column means, which is how the bootstrap of ``--ci``
reduces a family (:mod:`sodkit.metrics.bootstrap`). The rows cannot be measured from one
(prediction, GT) pair, so the family's per-pair ``measure`` leaves ``(0, 0)`` and the folder
evaluator fills the rows in one pass over each video's frames in order
(:mod:`sodkit.evaluation.temporal`), after the shards are merged.
"""

from __future__ import annotations

import numpy as np

WIDTH = 2  # (w_t * Flicker_t, w_t): w_t 1 where the frame has a previous one and S_t is not empty


def flicker_row(prev_pred: np.ndarray | None, pred: np.ndarray | None,
                prev_gt: np.ndarray | None, gt: np.ndarray) -> np.ndarray:
    """Frame t's row from frames t-1 and t (uint8 (H, W) each); ``(0, 0)`` without a
    previous frame (or prediction), or where the GT changed everywhere."""
    if prev_pred is None or pred is None or prev_gt is None or prev_gt.shape != gt.shape \
            or prev_pred.shape != pred.shape:
        return np.zeros(WIDTH)
    still = prev_gt == gt
    count = int(np.count_nonzero(still))
    if count == 0:
        return np.zeros(WIDTH)
    change = np.abs(pred.astype(np.int16) - prev_pred.astype(np.int16))[still]
    return np.array([float(change.sum(dtype=np.int64)) / (255.0 * count), 1.0])


def placeholder(_pair: object) -> np.ndarray:
    """The per-pair row before the frames are seen in order (module docstring)."""
    return np.zeros(WIDTH)


def summarize(rows: np.ndarray) -> dict[str, float]:
    """The mean of Flicker_t over the frames that count (the ratio of the column sums: of the
    column means too); NaN when none counts."""
    weight = float(np.sum(rows[:, 1]))
    return {"Flicker": float(np.sum(rows[:, 0])) / weight if weight > 0 else float("nan")}


def per_frame(rows: np.ndarray) -> dict[str, np.ndarray]:
    """Each frame's Flicker_t (NaN for a video's first frame)."""
    counts = rows[:, 1] > 0
    return {"Flicker": np.where(counts, rows[:, 0] / np.where(counts, rows[:, 1], 1), np.nan)}
