"""int8: onnxruntime's static quantization of an fp32 graph, in the QDQ format.

Weights int8 per output channel, activations uint8 with ranges measured on a few images
(calibration: rendered photos, :func:`calibration_batches`, so that the cached graph does not
depend on which photos a user happened to predict first). Measured against fp32 in
benchmarks/RESULTS.md ("Precision and accuracy"): on the CNNs it was the fastest variant
(2.8-2.9x onnxruntime fp32); dynamic quantization, which needs no calibration, was slower than
fp32 there and is not offered. onnxruntime's quantizer logs a line per tensor it leaves alone
and may print from C++: both kept off the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

CALIBRATION_IMAGES = 4  # rendered photos the activations' ranges are measured on


def calibration_batches(transform: Callable[[np.ndarray], object],
                        count: int = CALIBRATION_IMAGES, seed: int = 0) -> list[np.ndarray]:
    """``count`` rendered photos (:mod:`sodkit.data.render`, seeded) through the inference
    ``transform``, each a (1, 3, S, S) float32 batch."""
    from ..data.render import render_sample

    rng = np.random.default_rng(seed)
    return [np.ascontiguousarray(transform(render_sample(rng, 320, 640)[0])[None].numpy(),
                                 dtype=np.float32) for _ in range(count)]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    from ..engine.export import quiet_output

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer logs through the root logger
    try:
        with warnings.catch_warnings(), quiet_output("onnxruntime.quantization"):
            warnings.simplefilter("ignore")
            yield
    finally:
        root.setLevel(level)


def quantize_graph(fp32: Path, out: Path, batches: list[np.ndarray]) -> None:
    """Write ``out``: ``fp32`` quantized statically (QDQ), calibrated on ``batches``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            item = next(self.items, None)
            return None if item is None else {"image": item}

    with _quiet():
        quantize_static(str(fp32), str(out), Reader(), quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
