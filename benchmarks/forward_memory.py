"""Peak resident memory of one PyTorch forward pass per batch size on the CPU (issue 35: the
figure behind predict's default batch at high resolution).

    .venv/bin/python benchmarks/forward_memory.py --batch 1 2 4 [--write]
    .venv/bin/python benchmarks/forward_memory.py configs/duts_minet_r50.yaml --size 320 \\
        --batch 1 8 model.pretrained=null

Default: BiRefNet Swin-T at 1024 px (the general recipe with ``model.backbone=swin_tiny_...``,
random weights). Each batch size is a fresh process that builds the network, applies the memory
setting ``sodkit predict`` runs with (:func:`sodkit.resources.keep_freed_memory`), then runs one
forward pass under ``torch.inference_mode`` with one thread. Its peak resident set (the
kernel's ``VmHWM``: this process's own high-water mark, which ``ru_maxrss`` is not across an
exec) is read after the build and after the forward; the difference is what the forward pass
adds to the weights.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWIN_T = "swin_tiny_patch4_window7_224"
DEFAULT = ("configs/general_birefnet_swinl.yaml", [f"model.backbone={SWIN_T}",
                                                   "model.pretrained=null"])


def high_water_mib() -> float:
    status = Path("/proc/self/status").read_text().split("VmHWM:")[1]
    return int(status.split()[0]) / 1024


def child(config: str, size: int, batch: int, overrides: list[str]) -> None:
    """In the fresh process: build, forward, print the two peaks and the forward's seconds."""
    sys.path.insert(0, str(ROOT))
    from dataclasses import replace

    import torch

    from sodkit.config import load_config
    from sodkit.network import build_network
    from sodkit.resources import keep_freed_memory

    torch.set_num_threads(1)
    keep_freed_memory()
    cfg = load_config(config, overrides)
    net = build_network(replace(cfg.model, pretrained=None), aux_outputs=False).eval()
    x = torch.randn(batch, 3, size, size)
    built = high_water_mib()
    start = time.perf_counter()
    with torch.inference_mode():
        net(x)["logits"].sigmoid()
    print(built, high_water_mib(), time.perf_counter() - start)


def measure(config: str, size: int, batch: int, overrides: list[str]) -> tuple[float, ...]:
    out = subprocess.run([sys.executable, __file__, config, *overrides, "--size", str(size),
                          "--child", str(batch)], capture_output=True, text=True, check=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout
    return tuple(float(v) for v in out.split()[-3:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default=DEFAULT[0])
    parser.add_argument("overrides", nargs="*", help="key=value (default: Swin-T, no weights)")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_intermixed_args()
    overrides = args.overrides or (DEFAULT[1] if args.config == DEFAULT[0] else [])
    if args.child:
        return child(args.config, args.size, args.child, overrides)
    rows = ["| batch | after the build | peak of the forward | the forward adds | per image "
            "| forward (1 thread) |", "|---:|---:|---:|---:|---:|---:|"]
    for batch in args.batch:
        built, peak, seconds = measure(args.config, args.size, batch, overrides)
        rows.append(f"| {batch} | {built / 1024:.2f} GiB | {peak / 1024:.2f} GiB | "
                    f"{(peak - built) / 1024:.2f} GiB | {(peak - built) / batch / 1024:.2f} GiB "
                    f"| {seconds:.1f} s |")
        print(rows[-1], flush=True)
    if args.write:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from metrics_speed import write_block

        command = " ".join(["benchmarks/forward_memory.py", *(
            [args.config, *args.overrides] if args.config != DEFAULT[0] else []),
            "--size", str(args.size), "--batch", *map(str, args.batch), "--write"])
        write_block("forward_memory", (
            f"### Peak resident memory of a PyTorch forward on the CPU, per batch\n\n"
            f"Command: `.venv/bin/python {command}` ({platform.machine()}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}, load average {os.getloadavg()[0]:.1f} at the "
            f"end). {args.config} with {' '.join(overrides)} at {args.size} px, one fresh "
            f"process per batch, `sodkit predict`'s memory setting, `inference_mode`:\n\n"
            + "\n".join(rows) + "\n"))


if __name__ == "__main__":
    main()
