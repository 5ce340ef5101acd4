"""Bounds on what one input file may cost, checked before the work it would cause.

A file can claim any size. A PNG of 890 KB declares 30000x30000 pixels (900 MB once decoded); a
2 MB PNG can inflate to 2 GiB under a 4x4 header; a sparse file says 8 GB and takes no disk; a
1.4 MB zip checkpoint can unpack to 1.4 GB. Each of these is refused with one line naming the
file and the setting, at the cost of reading its header. The defaults lie far above any real
photo, mask or checkpoint, so they only ever stop crafted or damaged files; raise them (for a
gigapixel scan, say) with environment variables, which every command and every worker process
sees alike, with or without a config:

- ``SODKIT_MAX_PIXELS``: pixels of one decoded image (default 2**28 = 268 megapixels, 16384 x
  16384; OpenCV's own limit is 2**30);
- ``SODKIT_MAX_FILE_MB``: size of one image file, which is read whole (default 1024 MiB); it
  bounds the result files a report reads whole too (JSON, CSV, ``train.log``);
- ``SODKIT_MAX_MEMORY_MB``: the memory that work whose size is a product of settings may ask
  for (an image's pixels times an algorithm's bytes per pixel, a batch times the network's
  memory per image): :func:`check_memory`, before the work. Default: the memory available
  when it is asked (``MemAvailable``, or a container's limit), so that such work is refused
  in one line instead of being killed by the system.

Fixed bounds: a checkpoint (a zip) may declare at most :data:`MAX_UNPACKED_RATIO` times its size
on disk once unpacked (torch stores tensors uncompressed, so a real one declares less than its
size). The network's input side (``data.size``, ``--size``) is bounded by the config schema
(``config.schema.MAX_SIZE``).
YAML files are bounded in ``sodkit.config.yamlio``.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from .errors import DataError, UserError

MAX_PIXELS_VARIABLE = "SODKIT_MAX_PIXELS"
DEFAULT_MAX_PIXELS = 1 << 28
MAX_FILE_MB_VARIABLE = "SODKIT_MAX_FILE_MB"
DEFAULT_MAX_FILE_MB = 1024
MAX_MEMORY_MB_VARIABLE = "SODKIT_MAX_MEMORY_MB"
GIB = 1 << 30
MAX_UNPACKED_RATIO = 4  # a checkpoint's declared unpacked size / its size on disk
MIB = 1 << 20
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)  # O_BINARY: Windows only


def _setting(variable: str, default: int) -> int:
    text = os.environ.get(variable)
    if text is None or not text.strip():
        return default
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise UserError(f"{variable}={text!r}: expected a positive whole number (default "
                        f"{default}); set it right or unset it")
    return value


def max_pixels() -> int:
    """The most pixels one decoded image may have (``SODKIT_MAX_PIXELS``)."""
    return _setting(MAX_PIXELS_VARIABLE, DEFAULT_MAX_PIXELS)


def max_file_bytes() -> int:
    """The largest image file read (``SODKIT_MAX_FILE_MB``, in MiB)."""
    return _setting(MAX_FILE_MB_VARIABLE, DEFAULT_MAX_FILE_MB) * MIB


def memory_budget() -> tuple[int | None, str]:
    """``(bytes, what they are)``: ``SODKIT_MAX_MEMORY_MB`` when set, else the memory available
    now (:func:`sodkit.resources.available_memory`); None where neither is known."""
    if os.environ.get(MAX_MEMORY_MB_VARIABLE, "").strip():
        limit = _setting(MAX_MEMORY_MB_VARIABLE, 1) * MIB
        return limit, f"the limit of {gib(limit)} ({MAX_MEMORY_MB_VARIABLE})"
    from .resources import available_memory

    available = available_memory()
    return available, f"the {gib(available or 0)} of memory available"


def gib(size: float) -> str:
    """A size in bytes for messages: ``1.4 GiB``, ``310 MiB``."""
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{max(size / MIB, 0.1):.3g} MiB"


def check_memory(need: int, what: str, lower: str,
                 budget: tuple[int | None, str] | None = None) -> None:
    """Refuse work that needs ``need`` bytes, more than :func:`memory_budget` (or ``budget``:
    ``(bytes, what they are)``, a GPU's), before it starts: one line saying what needs how
    much (``what``), what is there, and what to lower (``lower``). Nothing is refused where
    the budget is unknown."""
    limit, described = budget or memory_budget()
    if limit is None or need <= limit:
        return
    setting = "" if budget else (f" (or, if the memory is there, raise {MAX_MEMORY_MB_VARIABLE},"
                                 f" e.g. {MAX_MEMORY_MB_VARIABLE}={_suggest(-(-need // MIB))})")
    raise UserError(f"{what} needs about {gib(need)}, more than {described}; {lower}{setting}")


def check_pixels(path: str | Path, width: int, height: int) -> None:
    """Refuse an image whose header declares more pixels than :func:`max_pixels`, before any
    decoder allocates them."""
    limit = max_pixels()
    if width * height <= limit:
        return
    raise DataError(
        f"{path}: its header declares {width}x{height} pixels ({width * height / 1e6:.0f} "
        f"megapixels), more than the limit of {limit / 1e6:.0f} megapixels; a damaged or "
        f"crafted file, or a real image that large: then raise the limit, e.g. "
        f"{MAX_PIXELS_VARIABLE}={_suggest(width * height)}")


def _suggest(needed: int) -> int:
    return 1 << max(needed - 1, 1).bit_length()


def check_file_size(path: str | Path, what: str = "file") -> None:
    """Refuse a file larger than ``SODKIT_MAX_FILE_MB`` before it is read whole (a run folder
    from elsewhere may hold a sparse ``results.json`` that says 8 GB)."""
    limit = max_file_bytes()
    try:
        size = os.stat(path).st_size
    except OSError:
        return  # the reader names the problem
    if size > limit:
        raise _too_large(path, size, limit, what)


def read_file(path: str | Path) -> bytes:
    """An image file's bytes, its size checked before reading (a sparse file may say 8 GB).

    Unbuffered ``os`` calls: a 3 KB mask is read in a third of the time ``open().read()``
    takes, which pays for the check.
    """
    limit = max_file_bytes()
    try:
        fd = os.open(path, _READ_FLAGS)
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise _too_large(path, size, limit)
            data = os.read(fd, size + 1)
            return data if len(data) == size else _read_rest(fd, path, data, limit)
        finally:
            os.close(fd)
    except OSError as exc:
        raise DataError(f"cannot read image file {path}: {exc.strerror or exc}") from None


def _read_rest(fd: int, path: str | Path, data: bytes, limit: int) -> bytes:
    """What follows a short first read (a pipe, a network file system, a file that grows),
    still within the limit."""
    parts, total = [data], len(data)
    while data:
        data = os.read(fd, 1 << 20)
        total += len(data)
        if total > limit:
            raise _too_large(path, total, limit)
        parts.append(data)
    return b"".join(parts)


def _too_large(path: str | Path, size: int, limit: int, what: str = "image") -> DataError:
    return DataError(
        f"{path}: the file is {size / MIB:.0f} MiB, more than the limit of {limit // MIB} MiB "
        f"for one {what}; a damaged or crafted file, or a real {what} that large: then raise "
        f"the limit, e.g. {MAX_FILE_MB_VARIABLE}={_suggest(-(-size // MIB))}")


def check_unpacked_size(path: str | Path, what: str = "checkpoint") -> None:
    """Refuse a zip (a torch checkpoint) that declares much more unpacked data than its size on
    disk: torch would allocate what it declares. Not a zip (torch's legacy format, or no
    checkpoint at all): nothing to check here; the reader names the problem.

    Raises:
        UserError: the declared size exceeds :data:`MAX_UNPACKED_RATIO` times the file's.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with zipfile.ZipFile(path) as archive:
            declared = sum(member.file_size for member in archive.infolist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return
    if declared > MAX_UNPACKED_RATIO * size:
        raise UserError(
            f"{what} {path} declares {declared / MIB:.0f} MiB of unpacked data in "
            f"{size / MIB:.1f} MiB on disk (more than {MAX_UNPACKED_RATIO}x; torch stores "
            f"tensors uncompressed): a damaged or crafted file, not loaded")
