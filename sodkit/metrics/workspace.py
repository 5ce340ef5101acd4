"""Per-thread scratch arrays, and OpenCV kept single-threaded and IPP-free while measuring.

A fresh array of more than 128 KiB is a fresh ``mmap``: its first write page-faults on every
4 KiB page. On the VMs this project runs on, that made a 320x320 float64 table lookup 6x slower
(0.47 ms instead of 0.08 ms) and a squared-distance map 6x slower, i.e. most of the per-image time
outside the EDT. Buffers taken from here are allocated once per thread and reused; callers must
not keep them beyond the current image or batch.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator

import cv2
import numpy as np

_local = threading.local()
_opencv_lock = threading.Lock()
_opencv_users = [0, 0]  # blocks inside opencv_single_threaded, OpenCV's setting before them


def scratch(name: str, shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous array of ``shape`` and ``dtype``, reused across calls with
    the same ``name`` in the same thread (its contents are whatever was left there).

    The last view of each name is kept, so a repeated request (same image size) costs one dict
    lookup: with ~20 requests per image, building views was 1/5 of the time the weighted
    F-measure holds the GIL, which the other thread then waits for.
    """
    try:
        views = _local.views
    except AttributeError:
        views = _local.views = {}
        _local.arrays = {}
    view = views.get(name)
    if view is not None and view.shape == shape and view.dtype == dtype:
        return view
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    buffer = _local.arrays.get(name)
    if buffer is None or buffer.nbytes < nbytes:
        size = nbytes if buffer is None else max(nbytes, 2 * buffer.nbytes)
        buffer = _local.arrays[name] = np.empty(size, np.uint8)
    view = views[name] = buffer[:nbytes].view(dtype).reshape(shape)
    return view


@contextlib.contextmanager
def opencv_single_threaded() -> Iterator[None]:
    """Run OpenCV calls single-threaded and without Intel IPP inside the block, then restore.

    OpenCV parallelises each call (the EDT, filters) over its own thread pool; on the small maps
    measured here, waking that pool costs more than it saves: one 320x320 weighted F-measure
    took 4.7 ms with OpenCV's 2 threads and 3.3 ms with 1. ``SODMetrics`` parallelises over
    images instead. The thread setting is process-wide, hence restored when the last of possibly
    several concurrent blocks exits.

    IPP is switched off for the calling thread (OpenCV keeps that flag per thread): its exact
    EDT took 2.05 ms on a 320x320 mask where OpenCV's own took 1.76 ms, and the whole weighted
    F-measure 4.3 ms instead of 3.8 ms. OpenCV's own EDT is also the more exact one: it matched
    SciPy's squared distances on every mask tried (up to 2.9e6), IPP's misses from 886^2 + 1 on.
    """
    with _opencv_lock:
        if _opencv_users[0] == 0:
            _opencv_users[1] = cv2.getNumThreads()
            cv2.setNumThreads(1)
        _opencv_users[0] += 1
    use_ipp = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        yield
    finally:
        cv2.ipp.setUseIPP(use_ipp)
        with _opencv_lock:
            _opencv_users[0] -= 1
            if _opencv_users[0] == 0:
                cv2.setNumThreads(_opencv_users[1])
