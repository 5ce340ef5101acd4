"""``sodkit bench memory|speed CONFIG``: the seed's memory table, and where the time goes.

``memory`` runs each variant in a fresh process (forked by one ``python -m
sodkit.engine.bench_server``, which imports torch once) and prints peak memory and median step
time with ratios to ``plain``. ``speed`` measures images/s of the loader, the training step, the
whole loop and evaluation (:mod:`sodkit.engine.speed`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import int_in, user_path
from ..text import plural
from ._common import add_config_arguments

if TYPE_CHECKING:
    from ..config import Config
    from ..outputs import OutputFolder
    from ..progress import Progress

logger = logging.getLogger(__name__)

HELP = "measure memory (plain/checkpointing/amp/amp+checkpointing) or speed of a config"

FIELDS = ["variant", "peak_mb", "saved_mb", "step_s", "ratio_peak", "ratio_time"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", choices=["memory", "speed"], help="what to measure")
    add_config_arguments(parser)
    parser.add_argument("--steps", type=int_in(1), default=5,
                        help="measured steps per variant / stage, after one warm-up step")
    parser.add_argument("--rounds", type=int_in(1), default=3,
                        help="speed: interleaved rounds of loader / step / loop (medians)")
    parser.add_argument("--variants", type=_variant_list, default=list(VARIANTS),
                        help="memory: comma-separated subset of " + ",".join(VARIANTS)
                        + " (ratios are to the first), e.g. plain,checkpointing at 1024 px")
    parser.add_argument("--json", metavar="FILE", type=user_path,
                        help="also write the rows as JSON")


VARIANTS = ("plain", "checkpointing", "amp", "amp+checkpointing")


def _variant_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or text!r}: variants are "
                                         f"{','.join(VARIANTS)}")
    return names


def variants(amp: str) -> dict[str, list[str]]:
    """Variant name -> its config overrides; ``amp`` is bf16 on the CPU, fp16 on CUDA."""
    return {
        "plain": ["model.checkpointing=off", "runtime.precision=fp32"],
        "checkpointing": ["model.checkpointing=all", "runtime.precision=fp32"],
        "amp": ["model.checkpointing=off", f"runtime.precision={amp}"],
        "amp+checkpointing": ["model.checkpointing=all", f"runtime.precision={amp}"],
    }


class VariantServer:
    """``python -m sodkit.engine.bench_server`` (:func:`sodkit.engine.bench.serve`): one process
    that imports torch and sodkit once and measures each variant in a child of its own, with
    glibc told to give freed memory back. Its stderr carries each variant's stages (which move
    ``progress`` on) and errors, its stdout each result."""

    def __init__(self) -> None:
        from ..engine.memory import CPU_MEMORY_ENV

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sodkit.engine.bench_server"],
            env={**os.environ, **CPU_MEMORY_ENV}, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def __enter__(self) -> VariantServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        if exc[0] is not None:
            self.proc.kill()
        self.proc.wait()

    def measure(self, args: argparse.Namespace, overrides: list[str],
                progress: Progress | None = None, name: str = "") -> dict[str, Any]:
        from ..engine.bench import DONE, PROGRESS
        from ..errors import UserError

        request = {"config": args.config, "overrides": [*args.overrides, *overrides],
                   "steps": args.steps}
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        other: list[str] = []
        code = None
        for line in self.proc.stderr:  # type: ignore[union-attr]
            if line.startswith(DONE):
                code = int(line[len(DONE):])
                break
            if line.startswith(PROGRESS):
                if progress is not None:
                    progress.update(postfix=f"{name}: {line[len(PROGRESS):].strip()}")
            else:
                other.append(line)
        if code != 0:
            raise UserError(f"bench variant {' '.join(overrides)} failed:\n"
                            f"{''.join(other)[-2000:]}")
        return json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]


def memory_rows(args: argparse.Namespace, device: str, cfg: Config | None = None
                ) -> list[dict[str, Any]]:
    from ..progress import Progress

    amp = "fp16" if device.startswith("cuda") else "bf16"
    chosen = getattr(args, "variants", None) or list(VARIANTS)
    picked = {name: o for name, o in variants(amp).items() if name in chosen}
    if cfg is not None:
        logger.info("bench memory: %s (%s), each in a fresh process on %s: the %s/%s network "
                    "built, one warm-up step and %s of batch %d x %dpx", plural(
                        len(picked), "variant"), ", ".join(picked), device, cfg.model.name,
                    cfg.model.backbone, plural(args.steps, "measured step"),
                    cfg.data.batch_size, cfg.data.size)
    stages = 2 + args.steps  # built, warm-up, the measured steps
    with Progress(len(picked) * stages, "bench memory", unit="stage",
                  summary=True) as progress, VariantServer() as server:
        rows = [{"variant": name, **server.measure(args, overrides, progress, name)}
                for name, overrides in picked.items()]
    first = rows[0]  # plain, unless left out
    for row in rows:
        row["ratio_peak"] = round(row["peak_mb"] / max(first["peak_mb"], 1e-9), 3)
        row["ratio_time"] = round(row["step_s"] / first["step_s"], 3)
        row["peak_mb"], row["saved_mb"] = round(row["peak_mb"], 1), round(row["saved_mb"], 2)
        row["step_s"] = round(row["step_s"], 4)
    return rows


def memory_table(rows: list[dict[str, Any]], device: str) -> str:
    how = ("CUDA max_memory_allocated during the step minus memory_allocated before it"
           if device.startswith("cuda") else
           "peak resident set size during the step (VmHWM, reset via /proc/self/clear_refs) minus "
           "the resident size before it, with MALLOC_MMAP_THRESHOLD_=65536 so that glibc returns "
           "freed memory")
    lines = [f"peak_mb: memory a training step adds ({how}); saved_mb: tensors saved for "
             "backward (unique storages, parameters excluded); step_s: median step time.", "",
             "| variant | peak_mb | saved_mb | step_s | ratio_peak | ratio_time |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['peak_mb']:.1f} | {r['saved_mb']:.1f} | "
                     f"{r['step_s']:.3f} | {r['ratio_peak']} | {r['ratio_time']} |")
    return "\n".join(lines)


def check_json(path: str | None) -> OutputFolder | None:
    """``--json``, before minutes of measuring: a file name in an existing folder, not another
    command's folder, not a file of the user's (:func:`sodkit.outputs.single_file`)."""
    if path is None:
        return None
    from ..errors import UserError
    from ..outputs import single_file

    out = Path(path)
    if not out.parent.is_dir():
        raise UserError(f"--json {out}: the folder {out.parent} does not exist; create it "
                        f"first, or choose another --json")
    return single_file(out, "bench", False, "--json", flag=None)


def run(args: argparse.Namespace) -> int:
    from ._common import check_model_files, load_cli_config

    cfg = load_cli_config(args)  # config mistakes stop here, before any subprocess
    target = check_json(args.json)
    check_model_files(cfg)
    if args.what == "speed":
        from ..engine.speed import measure_speed, speed_table

        rows = measure_speed(cfg, args.steps, max(args.rounds, 1))
        print(speed_table(rows))
    else:
        import torch

        device = cfg.runtime.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        rows = memory_rows(args, device, cfg)
        print(memory_table(rows, device))
    if target is not None:
        target.write_text(Path(args.json), json.dumps(rows, indent=2) + "\n")
    return 0
