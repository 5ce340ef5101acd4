"""Which runtime and precision run the forward: ``--runtime torch|onnx|auto`` and
``--precision fp32|bf16|fp16|int8`` checked, and ``auto`` resolved, before any work.

The rule of ``auto`` (backed by benchmarks/RESULTS.md, "Inference on the CPU"): onnxruntime
where it is installed and the device is the CPU (its fp32 forward was 1.3-2.1x PyTorch's at one
thread for the demo FPN, MINet-R50 and BiRefNet Swin-T, and lost far less to a busy machine);
PyTorch on a GPU and where onnxruntime is missing. A network that does not export falls back to
PyTorch with a line saying so (:mod:`sodkit.runners.load`). ``auto`` never changes the
precision: fp32 unless the user asks for another.

Precisions (docs/inference.md has their measured accuracy cost):

- ``fp32``: either runtime; the masks of both agree to 1/255;
- ``bf16``: PyTorch's autocast, on CUDA or on a CPU with bf16 units (AVX-512-BF16 or AMX:
  elsewhere the CPU emulates it, slower than fp32, and it is refused);
- ``fp16``: PyTorch's autocast on CUDA;
- ``int8``: onnxruntime, the graph quantized statically (QDQ: int8 weights per channel, uint8
  activations calibrated on a few images).

Light: imports nothing heavy until asked.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

RUNTIMES = ("auto", "torch", "onnx")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo's names of the CPU's bf16 units


@dataclass(frozen=True)
class Choice:
    """What runs the forward: ``runtime`` torch or onnx, at ``precision``; ``why``: how
    ``auto`` chose (empty when the user named the runtime)."""

    runtime: str
    precision: str
    why: str = ""

    @property
    def name(self) -> str:
        """``PyTorch fp32``, ``onnxruntime int8``, ..."""
        return f"{ {'torch': 'PyTorch', 'onnx': 'onnxruntime'}[self.runtime]} {self.precision}"

    def describe(self) -> str:
        return self.name + (f" ({self.why})" if self.why else "")


@functools.cache
def has_onnxruntime() -> bool:
    """Whether onnxruntime imports (a broken install is missing too) and onnx, which the
    export needs, is installed (imported only when a graph is exported)."""
    import importlib.util

    try:
        import onnxruntime  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or a wheel that fails as it loads
        return False
    return importlib.util.find_spec("onnx") is not None


def onnx_missing(what: str) -> UserError:
    """One line: ``what`` needs onnxruntime, and the command that installs it here."""
    from ..extras import install_hint

    return UserError(f"{what} needs onnxruntime and onnx, which are not installed: "
                     f"{install_hint('export')}")


def check_onnx_installed(runtime: str, precision: str, device: str) -> None:
    """``--runtime onnx`` on a machine without onnxruntime: the refusal :func:`choose` would
    make once the model is read and torch imported (3-4 s in), made from the arguments alone.
    Only where it is the refusal ``choose`` makes: fp32 and not a CUDA device."""
    if runtime == "onnx" and precision == "fp32" and not device.startswith("cuda") \
            and not has_onnxruntime():
        raise onnx_missing("--runtime onnx")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (Linux); empty where they cannot be read."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def bf16_problem(device_type: str, flags: set[str] | None = None) -> str | None:
    """Why bf16 cannot run fast on this device, or None where it can."""
    if device_type == "cuda":
        return None
    flags = cpu_flags() if flags is None else flags
    if flags & set(BF16_FLAGS):
        return None
    return ("this CPU has no bf16 units (AVX-512-BF16 or AMX; PyTorch would emulate bf16, "
            "slower than fp32): use fp32, or int8 (--runtime onnx)")


def choose(runtime: str, precision: str, device_type: str, what: str = "--runtime",
           flags: set[str] | None = None) -> Choice:
    """The runtime and precision to run, or one line saying why the pair cannot run here.
    ``device_type``: ``cpu`` or ``cuda`` (the resolved device's)."""
    if runtime not in RUNTIMES:
        raise UserError(f"{what} {runtime!r}: choose one of {', '.join(RUNTIMES)}")
    if precision not in PRECISIONS:
        raise UserError(f"--precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    if precision == "fp16" and device_type != "cuda":
        raise UserError("--precision fp16 runs on CUDA only; on the CPU use bf16 (where the CPU "
                        "has bf16 units) or int8")
    if precision == "bf16":
        problem = bf16_problem(device_type, flags)
        if problem:
            raise UserError(f"--precision bf16: {problem}")
    if precision == "int8":
        if runtime == "torch":
            raise UserError("--precision int8 runs on onnxruntime: use --runtime onnx or auto")
        if device_type != "cpu":
            raise UserError("--precision int8 runs on the CPU (onnxruntime): use --device cpu")
        if not has_onnxruntime():
            raise onnx_missing("--precision int8")
        return Choice("onnx", "int8", "" if runtime == "onnx" else "int8 runs on onnxruntime")
    if runtime == "onnx":
        if device_type != "cpu":
            raise UserError("--runtime onnx runs on the CPU: use --device cpu, or --runtime "
                            "torch on the GPU")
        if precision != "fp32":
            raise UserError(f"--precision {precision} runs on PyTorch (autocast): use "
                            f"--runtime torch or auto")
        if not has_onnxruntime():
            raise onnx_missing("--runtime onnx")
        return Choice("onnx", precision)
    if runtime == "torch":
        return Choice("torch", precision)
    return _auto(precision, device_type)


def _auto(precision: str, device_type: str) -> Choice:
    if device_type != "cpu":
        return Choice("torch", precision, f"auto: {device_type}")
    if precision != "fp32":
        return Choice("torch", precision, f"auto: {precision} runs on PyTorch")
    if not has_onnxruntime():
        return Choice("torch", precision, "auto: onnxruntime is not installed")
    return Choice("onnx", precision, "auto: the CPU")
