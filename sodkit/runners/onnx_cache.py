"""The ONNX graph of a trained model, exported once and kept in sodkit's cache folder.

``<cache>/onnx/<key>.onnx`` (:func:`sodkit.cache.cache_dir`; ``$SODKIT_CACHE`` moves it), and
beside it ``<key>.json`` saying what it is. The key is the sha256 of everything the graph
depends on: the model file's sha256 and size, the weights asked for (auto, ema, model), the
network's config, the input side, what the graph outputs (the pipeline's scores), the precision
and its quantization settings, the opset rule, and the versions of sodkit, torch, onnx and
onnxruntime. A changed model file (or an upgrade) is a new key: the graph is exported anew,
never read stale. The file's digest is remembered with its stat (:func:`file_sha256`), so a
start reads a large model file once, not every time.

Written whole or not at all (:func:`sodkit.atomic.atomic_target`): two processes exporting the
same graph at once each write their own temporary file and rename it into place; either result
is the same graph. The graph is exported with dynamic batch, height and width, so one file
serves every input side the command may use (a plain ViT's position embedding excepted: it is
resampled for the side, which is in the key).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import atomic_target, write_atomic
from ..errors import UserError

if TYPE_CHECKING:
    from ..config.schema import ModelCfg
    from ..trained import TrainedFile

logger = logging.getLogger(__name__)

FORMAT = 1  # bump when what this module writes changes


class CacheUnwritable(UserError):
    """The cache folder cannot be made: ``auto`` runs PyTorch instead."""


@dataclass(frozen=True)
class GraphRequest:
    """What a cached graph is made from, besides the model file."""

    weights: str  # --weights: auto, ema or model
    size: int  # the input side it is exported at
    coarse: bool  # the graph outputs the pipeline's coarse logits (F3Net's), else the logits
    precision: str  # fp32 or int8
    model: ModelCfg | None = None  # the network to build (None: the file's own)


MEMO = "sha256-memo.json"  # model files' digests by path and stat, beside the graphs
MEMO_ENTRIES = 256
MEMO_BYTES = 1 << 20


def file_sha256(path: Path) -> str:
    """The file's sha256, remembered in the cache with its device, inode, size, modification
    and change times (``st_ctime`` changes with any write or replacement, and no tool sets it
    back): a file whose stat is the same is not read again (hashing ran at about 230 MB/s
    here, 2.8 s of every start for MINet-R50's 650 MB); any change is hashed anew."""
    from ..outputs.folder import sha256_file

    st = path.stat()
    stamp = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    key, memo_path = str(path.resolve()), cache_folder() / MEMO
    memo = _read_memo(memo_path)
    entry = memo.get(key)
    if isinstance(entry, dict) and entry.get("stat") == stamp and isinstance(
            entry.get("sha256"), str):
        return entry["sha256"]
    digest = sha256_file(path)
    memo.pop(key, None)
    memo[key] = {"stat": stamp, "sha256": digest}
    kept = dict(list(memo.items())[-MEMO_ENTRIES:])
    try:
        memo_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(memo_path, json.dumps(kept) + "\n")
    except Exception as exc:  # noqa: BLE001 - a read-only cache: hash again next time
        logger.debug("could not remember the digest of %s: %s", path, exc)
    return digest


def _read_memo(path: Path) -> dict[str, Any]:
    from ..cache import read_cache_json

    return read_cache_json(path, MEMO_BYTES)


def versions() -> dict[str, str]:
    """The installed versions the graph depends on, read from the packages' metadata (a cached
    graph's run imports neither onnx nor torch's exporter)."""
    from importlib.metadata import version

    from ..version import __version__

    return {"sodkit": __version__, **{name: version(name) for name in (
        "torch", "onnx", "onnxruntime")}}


def graph_key(file: TrainedFile, request: GraphRequest) -> tuple[str, dict[str, Any]]:
    """``(key, what it is made of)`` for ``request`` on ``file``."""
    from ..config import to_dict
    from .quantize import CALIBRATION_IMAGES

    model = request.model or file.config.model
    made_of = {
        "format": FORMAT,
        "file": {"sha256": file_sha256(file.source), "size": file.source.stat().st_size},
        "weights": request.weights, "model": to_dict(model), "size": request.size,
        "output": "coarse_logits" if request.coarse else "logits",
        "precision": request.precision,
        "quantization": ({"format": "QDQ", "weights": "int8 per channel",
                          "activations": "uint8", "calibration": CALIBRATION_IMAGES}
                         if request.precision == "int8" else None),
        "opset": "sodkit.engine.export.default_opset", "dynamic": ["batch", "height", "width"],
        "versions": versions(),
    }
    text = json.dumps(made_of, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32], made_of


def cache_folder() -> Path:
    """``$SODKIT_ONNX_CACHE`` when set (the tests' own), else ``<cache>/onnx``."""
    import os

    from ..cache import cache_dir

    given = os.environ.get("SODKIT_ONNX_CACHE")
    return Path(given).expanduser() if given else cache_dir() / "onnx"


def cached_graph(file: TrainedFile, request: GraphRequest,
                 calibration: Any = None) -> tuple[Path, bool]:
    """``(path, exported now)``: the graph of ``request``, exported (and quantized: int8,
    calibrated on ``calibration()``'s batches) when it is not in the cache yet."""
    key, made_of = graph_key(file, request)
    folder = cache_folder()
    path = folder / f"{key}.onnx"
    if path.is_file():
        return path, False
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheUnwritable(
            f"the ONNX cache {folder} cannot be created ({exc.strerror or exc}): set "
            f"SODKIT_CACHE (or SODKIT_ONNX_CACHE) to a writable folder, or use --runtime "
            f"torch") from None
    if request.precision == "int8":
        fp32, _ = cached_graph(file, replace(request, precision="fp32"))
        from .quantize import quantize_graph

        start = time.perf_counter()
        with atomic_target(path) as tmp:
            quantize_graph(fp32, tmp, calibration())
        logger.info("quantized to int8 in %.1f s, cached as %s", time.perf_counter() - start,
                    path)
    else:
        _export(file, request, path)
    write_atomic(folder / f"{key}.json", json.dumps(made_of, indent=1, default=str) + "\n")
    return path, True


def _export(file: TrainedFile, request: GraphRequest, path: Path) -> None:
    from ..engine.export import default_opset, export_onnx
    from ..trained import load_trained
    from .scores import ScoresModel

    start = time.perf_counter()
    trained = load_trained(file, weights=request.weights, model=request.model,
                           aux_outputs=False, checkpointing="off")
    model = ScoresModel(trained.network, request.coarse).eval()
    opset = default_opset(model)
    size = (request.size, request.size)
    with atomic_target(path) as tmp:
        export_onnx(model, tmp, size, opset, dynamic=True, names=("image", "scores"))
    logger.info("exported %s to ONNX (opset %d) in %.1f s, cached as %s", file.source.name,
                opset, time.perf_counter() - start, path)


def index_graph(file: TrainedFile, request: GraphRequest, path: Path, pipeline: str) -> None:
    """Say in the graphs' index (:mod:`sodkit.runners.graph_index`) that ``path`` is the graph
    of ``request`` on ``file`` (its own network) run through ``pipeline``, so that a later
    ``sodkit predict`` runs it without reading the file (or importing torch)."""
    from . import graph_index

    cfg = file.config
    key = graph_index.index_key(file_sha256(file.source), request.weights, request.precision,
                                versions())
    about = {"default_size": cfg.data.size, "pipeline": pipeline, "mean": list(cfg.data.mean),
             "std": list(cfg.data.std), "tta": list(cfg.eval.tta), "name": cfg.model.name,
             "backbone": cfg.model.backbone, "coarse": request.coarse}
    graph_index.remember(cache_folder(), key, request.size, path, about)


def optimised_path(graph: Path) -> Path:
    """Where the session keeps ``graph``'s optimised copy (:func:`sodkit.inference.
    onnx_session.open_session`): beside it, named for this CPU's features and onnxruntime's
    version, which its kernels depend on."""
    from .choice import cpu_flags

    machine = json.dumps([versions()["onnxruntime"], sorted(cpu_flags())])
    tag = hashlib.sha256(machine.encode()).hexdigest()[:12]
    return graph.with_name(f"{graph.stem}.{tag}.optimised.onnx")
