"""Checkpoint files on disk: atomic writes, and reads that never unpickle code.

A ``.pt`` file is a pickle, and unpickling runs whatever callables the file names, so a
checkpoint from the internet could run arbitrary code. sodkit therefore reads every checkpoint
with ``torch.load(weights_only=True)``, which accepts tensors and plain Python types only, and
sodkit's own checkpoints hold nothing else (RNG states included; see
:meth:`sodkit.engine.runtime.Runtime.rng_state`). A file that needs more is refused with the names
of the globals it asks for. Checkpoints of format 1 (numpy RNG state as an ``ndarray``) are
converted once by :func:`convert_legacy`, which allows numpy's array reconstruction and nothing
else: data, not code.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .errors import SaveInterrupted, UserError, WriteFailed
from .limits import check_unpacked_size

FORMAT = 2  # 1: numpy RNG state pickled as ndarray; 2: tensors and plain types only
_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


def save_atomic(obj: Any, path: str | Path) -> None:
    """torch.save to a temporary file, fsync, then rename: a crash never leaves half a file.

    Raises:
        SaveInterrupted: Ctrl-C during the write (the temporary file is removed, ``path`` is
            as it was).
        WriteFailed: the disk is full, the folder is not writable, a file size limit was met
            (again ``path`` is as it was).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    existed = path.exists()
    watched: _Watched | None = None
    try:
        with open(tmp, "wb") as fh:
            watched = _Watched(fh)
            torch.save(obj, watched)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except KeyboardInterrupt:
        raise SaveInterrupted(path, existed) from None
    except OSError as exc:
        raise WriteFailed(path, existed, exc) from None
    except RuntimeError:
        if watched is None or watched.error is None:
            raise
        raise WriteFailed(path, existed, watched.error) from None
    finally:
        tmp.unlink(missing_ok=True)


class _Watched:
    """The file torch.save writes through. torch's zip writer turns a failed write (a full disk)
    into an opaque ``RuntimeError: ... unexpected pos 704 vs 598``; this keeps the OSError."""

    def __init__(self, fh: Any) -> None:
        self.fh, self.error = fh, None
        self.name = getattr(fh, "name", None)  # as a file's, for whoever reports on it

    def write(self, data: bytes) -> int:
        try:
            return self.fh.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.fh.flush()


def _numpy_globals() -> list[Any]:
    """The globals a pickled numpy array needs, under the module names of numpy 1 and 2."""
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct  # type: ignore[no-redef]
    dtype_classes = {type(np.dtype(t)) for t in (np.uint32, np.int64, np.float64, np.uint8)}
    return [(_reconstruct, "numpy.core.multiarray._reconstruct"),
            (_reconstruct, "numpy._core.multiarray._reconstruct"),
            np.ndarray, np.dtype, *dtype_classes]


_NUMPY_NAMES = ("numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
                "numpy.ndarray", "numpy.dtype", "numpy.dtypes.")


def unsafe_globals(path: Path, error: Exception) -> list[str]:
    """The names of the globals (classes, functions) a pickle asks for beyond plain data."""
    finder = getattr(torch.serialization, "get_unsafe_globals_in_checkpoint", None)
    if finder is not None:
        with contextlib.suppress(Exception):
            return sorted(finder(str(path)))
    return sorted(set(_GLOBAL.findall(str(error))))  # torch < 2.5: the error names the first


def _is_legacy(names: list[str]) -> bool:
    return bool(names) and all(n.startswith(_NUMPY_NAMES) for n in names)


def _refusal(path: Path, names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if _is_legacy(names):
        return (f"{path} is a checkpoint of an older sodkit (its numpy RNG state is a pickled "
                f"array). Convert it once with `sodkit convert-checkpoint {path}` (it reads "
                f"numpy arrays only, never code, and keeps the original as {path.name}.orig)")
    return (f"refusing to load {path}: it needs pickled code or objects ({shown or 'unknown'}), "
            f"and sodkit never unpickles code (a checkpoint from elsewhere could run anything). "
            f"If you trust the file, re-save its weights as plain tensors yourself, e.g. "
            f"python -c \"import torch; obj = torch.load('{path}', weights_only=False); "
            f"torch.save({{'model': obj.state_dict() if hasattr(obj, 'state_dict') else "
            f"obj['model']}}, 'weights.pt')\", then load that")


def _mappable(path: Path) -> bool:
    """Whether torch can map the file: its zip format (not the legacy one from before torch 1.6)
    with every record stored uncompressed, as torch.save writes it (a re-zipped file may not)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return all(info.compress_type == zipfile.ZIP_STORED for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def _read(path: Path, allow: list[Any] | None = None, mmap: bool = False) -> Any:
    context: contextlib.AbstractContextManager = contextlib.nullcontext()
    mmap = mmap and _mappable(path)
    if allow:
        scoped = getattr(torch.serialization, "safe_globals", None)  # torch >= 2.5
        if scoped is not None:
            context = scoped(allow)
        else:
            torch.serialization.add_safe_globals(allow)
    with context:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)


# what a file is by its first bytes, for a file that is no torch file at all
_MAGIC = ((b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"),
          (b"GIF8", "a GIF image"), (b"BM", "a BMP image"), (b"\x1f\x8b", "a gzip archive"),
          (b"\x89HDF", "an HDF5 file (Keras?)"), (b"\x08", "an ONNX or protobuf file"),
          (b"%PDF", "a PDF document"))
_TORCH_MAGIC = (b"PK\x03\x04", b"\x80")  # torch.save's zip; the legacy format's pickle


def foreign_kind(path: Path) -> str | None:
    """What ``path`` is when it is no file torch.save writes (by its first bytes): ``a PNG
    image``, ``a .safetensors file``, ``text``...; None when it may be a torch file."""
    with open(path, "rb") as handle:
        head = handle.read(16)
    if head.startswith(_TORCH_MAGIC):
        return None
    if len(head) >= 9 and head[8:9] == b"{" and path.suffix.lower() != ".pt":
        return "a .safetensors file (give it a .safetensors name)"
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if not head:
        return "empty"
    try:
        head.decode("utf-8")
        return "text"
    except UnicodeDecodeError:
        return "not a file torch.save writes"


def read_weights_only(path: str | Path, what: str = "checkpoint", mmap: bool = False,
                      takes: str = "") -> Any:
    """``torch.load(weights_only=True)`` with one-line errors for every way a file can be wrong.

    ``mmap``: map the file instead of reading it, so that only the tensors used are ever read
    (see :func:`load_checkpoint`). ``takes``: what the setting takes, said when the file is
    something else altogether (a PNG given as a checkpoint).

    Raises:
        UserError: the path is missing or a folder, the file is truncated or not a torch file,
            it declares far more unpacked data than its size (torch would allocate it all), or
            it needs pickled code (the message names the globals and the way out).
    """
    path = Path(path).expanduser()
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; give the file, e.g. "
                        f"{path / 'checkpoints' / 'last.pt'}")
    if not path.is_file():
        raise UserError(f"{what} not found: {path}")
    check_unpacked_size(path, what)
    kind = foreign_kind(path)
    if kind is not None:  # a PNG given as a checkpoint is no pickle that needs code
        raise UserError(f"{what} {path} is {kind}, not a file written by torch.save"
                        + (f"; {takes}" if takes else ""))
    try:
        return _read(path, mmap=mmap)
    except pickle.UnpicklingError as exc:
        names = unsafe_globals(path, exc)
        if not names:  # a broken pickle, not one that asks for code
            raise UserError(f"cannot read {what} {path}: its pickle is damaged or was not "
                            f"written by torch.save" + (f"; {takes}" if takes else "")) from None
        raise UserError(_refusal(path, names)) from None
    except Exception as exc:  # truncated, not a zip, not a pickle: name the file and the cause
        raise UserError(f"cannot read {what} {path}: {exc.__class__.__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else 'unreadable'} "
                        f"(is it complete, and a file written by torch.save?)") from None


def load_checkpoint(path: str | Path, mmap: bool = False) -> dict[str, Any]:
    """A sodkit checkpoint or model file (``.safetensors``), on the CPU, read without unpickling
    code. A model file's dict has the checkpoint's ``model`` and ``config`` and no training
    state (``model_file`` is True).

    ``mmap``: for a reader that copies the weights it needs and drops the rest (``test``,
    ``export``, the Python API; ``predict`` keeps them mapped until it ends:
    :func:`sodkit.checkpoint_weights.assign_weights`): the file is mapped, not read, so a training
    checkpoint's optimizer state and the weights not picked (the EMA or the raw ones) are never
    read from disk (a ResNet-18 checkpoint: 10 ms instead of 25-40; a large network's training
    checkpoint holds gigabytes of optimizer state). Not for resuming: the optimizer would keep
    the mapped tensors."""
    from .model_file import is_model_file, read_model_file

    if is_model_file(path):
        return read_model_file(path)
    state = read_weights_only(path, mmap=mmap)
    if not isinstance(state, dict) or "model" not in state:
        raise UserError(f"{path} is not a sodkit checkpoint (no 'model' entry); to use a "
                        f"backbone's weights file, set model.pretrained instead")
    check_checkpoint_shape(state, path)
    return state


def check_checkpoint_shape(state: dict[str, Any], path: str | Path) -> None:
    """The entries every reader takes as given have their types: ``model`` a mapping of names to
    tensors, ``ema`` none or a mapping holding one, ``config`` a mapping (a checkpoint is
    input: a list where a mapping belongs is one line naming the file, not a traceback)."""
    def weights(value: Any) -> bool:
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())

    problem = None
    if not weights(state["model"]):
        problem = "its 'model' entry is not a mapping of names to tensors"
    elif state.get("ema") and not (isinstance(state["ema"], dict)
                                   and weights(state["ema"].get("model"))):
        problem = "its 'ema' entry holds no weights"
    elif state.get("config") is not None and not isinstance(state["config"], dict):
        problem = f"its stored config is a {type(state['config']).__name__}, not a mapping"
    if problem is not None:
        raise UserError(f"{path} is not a checkpoint sodkit can read: {problem} (the file is "
                        f"damaged or was not written by sodkit)")


def plain_numpy_state(state: tuple) -> dict[str, Any]:
    """numpy's ``get_state()`` tuple as a dict of a tensor and plain values."""
    name, keys, pos, has_gauss, cached = state
    return {"bit_generator": str(name), "keys": torch.from_numpy(np.asarray(keys, np.int64)),
            "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}


def numpy_state(plain: dict[str, Any]) -> tuple:
    """The tuple ``np.random.set_state`` takes, from :func:`plain_numpy_state`'s dict."""
    keys = plain["keys"].numpy().astype(np.uint32)
    return (plain["bit_generator"], keys, plain["pos"], plain["has_gauss"],
            plain["cached_gaussian"])


def _plain(obj: Any) -> Any:
    """Replace numpy RNG tuples and arrays anywhere in ``obj`` with tensors and plain types."""
    if isinstance(obj, tuple) and len(obj) == 5 and isinstance(obj[1], np.ndarray) \
            and obj[0] == "MT19937":
        return plain_numpy_state(obj)
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def convert_legacy(path: str | Path) -> Path:
    """Rewrite a format-1 checkpoint in place as format 2; the original is kept as ``.orig``.

    Reads with the weights-only unpickler plus numpy's array globals (data, never code), so a
    file that needs anything else is still refused.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    check_unpacked_size(path)
    try:
        state = _read(path, _numpy_globals())
    except pickle.UnpicklingError as exc:
        raise UserError(_refusal(path, [n for n in unsafe_globals(path, exc)
                                        if not n.startswith(_NUMPY_NAMES)])) from None
    except Exception as exc:
        raise UserError(f"cannot read checkpoint {path}: {exc}") from None
    if not isinstance(state, dict) or "model" not in state:
        raise UserError(f"{path} is not a sodkit checkpoint (no 'model' entry)")
    backup = path.with_name(path.name + ".orig")
    if backup.exists():
        raise UserError(f"{backup} exists already; move it away first (it may be the original "
                        f"of an earlier conversion)")
    converted = {**_plain(state), "format": FORMAT}
    shutil.copy2(path, backup)
    save_atomic(converted, path)
    return path
