"""Tiny crafted files that would cost gigabytes, and a way to run sodkit under a memory cap.

Every builder returns in milliseconds and writes at most a few MB: the big part is only declared
(a header's size, a zip member's size) or compressed (runs of zeros, whose deflate blocks repeat,
so the stream is built by repeating one block instead of compressing gigabytes).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np

from tests import processes

MIB = 1 << 20
_ZERO_BLOCK_BYTES = MIB


def _raw_deflate(data: bytes, finish: bool) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(zlib.Z_FINISH if finish
                                                        else zlib.Z_FULL_FLUSH)


def deflate_zeros(size: int, prefix: bytes = b"") -> bytes:
    """A raw deflate stream of ``prefix`` followed by zeros, ``size`` bytes in all (~1/1000 of
    it). Each full-flushed block refers to nothing before it, so one block repeated is valid."""
    head = prefix + bytes(min(size, _ZERO_BLOCK_BYTES) - len(prefix))
    left = size - len(head)
    blocks, rest = divmod(left, _ZERO_BLOCK_BYTES)
    return (_raw_deflate(head, finish=False)
            + _raw_deflate(bytes(_ZERO_BLOCK_BYTES), finish=False) * blocks
            + _raw_deflate(bytes(rest), finish=True))


def _zeros_adler32(size: int) -> int:
    """Adler-32 of ``size`` zero bytes (a = 1, b = size, both modulo 65521)."""
    return ((size % 65521) << 16) | 1


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))


def zero_png(width: int, height: int, inflated: int | None = None,
             extra: bytes = b"") -> bytes:
    """An 8-bit grey PNG of ``width`` x ``height`` black pixels whose image data inflates to
    ``inflated`` bytes (default: exactly what the header declares), ``extra`` chunks before it."""
    size = height * (width + 1) if inflated is None else inflated
    stream = b"\x78\xda" + deflate_zeros(size) + struct.pack(">I", _zeros_adler32(size))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + extra + _chunk(b"IDAT", stream)
            + _chunk(b"IEND", b""))


def text_chunk(key: str = "Comment", text: str = "hello") -> bytes:
    """A tEXt chunk (it sends a PNG to Pillow, which looks for an orientation in it)."""
    return _chunk(b"tEXt", key.encode("latin-1") + b"\0" + text.encode("latin-1"))


def jpeg_claiming(width: int, height: int) -> bytes:
    """A real 16x16 JPEG whose frame header (SOF0) is patched to say ``width`` x ``height``."""
    ok, buffer = cv2.imencode(".jpg", np.full((16, 16, 3), 90, np.uint8))
    assert ok
    data = bytearray(buffer.tobytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", height, width)  # length(2), precision(1), H, W
    return bytes(data)


def billion_laughs(levels: int = 9, width: int = 10,
                   section: tuple[str, ...] = ("model", "backbone_kwargs")) -> str:
    """YAML whose anchors expand to ``width ** levels`` strings (10**9 by default) in ~700 B,
    under ``section`` (a mapping of free values, so that the config's keys are all valid)."""
    lines = [f"{'  ' * depth}{key}:" for depth, key in enumerate(section)]
    pad = "  " * len(section)
    lines.append(f'{pad}a0: &a0 "lol"')
    for i in range(1, levels + 1):
        lines.append(f"{pad}a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def zip_bomb(path: Path, unpacked: int, member: str = "archive/data.pkl") -> Path:
    """A torch-style zip checkpoint whose ``data.pkl`` is a pickle of one ``bytes`` object of
    ``unpacked`` bytes (BINBYTES8), deflated to about 1/1000 of that."""
    prefix = b"\x80\x04\x8e" + struct.pack("<Q", unpacked - 11)  # PROTO 4, BINBYTES8 <length>
    data = deflate_zeros(unpacked, prefix)  # read whole before the missing STOP matters
    crc = 0  # checked only once everything is inflated
    name = member.encode()
    version = b"archive/version"
    local = [(name, data, unpacked, 8, crc), (version, b"3\n", 2, 0, zlib.crc32(b"3\n"))]
    body, central = b"", b""
    for entry_name, payload, size, method, entry_crc in local:
        offset = len(body)
        body += (struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, entry_crc,
                             len(payload), size, len(entry_name), 0) + entry_name + payload)
        central += (struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0,
                                entry_crc, len(payload), size, len(entry_name), 0, 0, 0, 0, 0,
                                offset) + entry_name)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(local), len(local), len(central),
                      len(body), 0)
    path.write_bytes(body + central + end)
    return path


def sparse_file(path: Path, size: int, head: bytes = b"\x89PNG\r\n\x1a\n") -> Path:
    """A file of ``size`` bytes that takes no disk space (a hole after ``head``)."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


# The runner imports what the command needs, measures the address space it then has, caps the
# rest at that plus HEADROOM, and runs ``sodkit`` as the command line does (exit code, stderr).
_RUNNER = """
import importlib, json, resource, sys
preload, argv, headroom = json.loads(sys.argv[1])
for name in preload:
    importlib.import_module(name)
with open("/proc/self/status") as status:
    size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + headroom, resource.RLIM_INFINITY))
from sodkit.cli import main
sys.exit(main(argv))
"""

HEADROOM = 512 * MIB  # several times what any of these cases needs once refused


def run_capped(argv: list[str], cwd: Path, preload: tuple[str, ...] = (),
               headroom: int = HEADROOM, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess:
    """``sodkit ARGV`` in a process whose address space may grow by ``headroom`` bytes after
    importing ``preload`` (torch alone maps gigabytes it never touches), with glibc's malloc
    arenas limited so that threads do not reserve the headroom."""
    import os

    environment = {**os.environ, "MALLOC_ARENA_MAX": "2", **(env or {})}
    root = str(Path(__file__).resolve().parents[1])
    environment["PYTHONPATH"] = root + os.pathsep + environment.get("PYTHONPATH", "")
    return processes.run([sys.executable, "-c", _RUNNER,
                          json.dumps([["sodkit.cli", *preload], argv, headroom])],
                         cwd=cwd, env=environment)
