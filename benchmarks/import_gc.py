"""What the cyclic garbage collector costs a ``sodkit`` process's start, and what
:mod:`sodkit.import_gc` (imports with the collector off) gives back: fresh processes of this
checkout, side by side, rounds alternating which side goes first.

    .venv/bin/python benchmarks/import_gc.py --rounds 5 --write

Two measures: the CPU seconds of a process that imports what ``sodkit train`` runs
(``sodkit.engine.trainer`` and the train command), and the CPU seconds (user + system, from
``wait4``) of a whole ``sodkit train`` of the demo FPN on timm's ``test_resnet`` (2 epochs of 16
pairs at 64 px, a test set of 6), through :func:`sodkit.cli.console_main` with and without the
collector switched off. The two runs' ``results.json`` must be the same bytes.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARK = "import_gc"
IMPORTS = r"""
import sys, time
if sys.argv[1] == "off":
    from sodkit import import_gc
    import_gc.install()
start = time.process_time()
import sodkit.engine.trainer, sodkit.commands.train
print(time.process_time() - start)
"""
TRAIN = r"""
import sys
side = sys.argv.pop(1)
import sodkit.import_gc
if side == "on":
    sodkit.import_gc.install = lambda: None  # console_main's own install: a no-op
from sodkit.cli import console_main
sys.argv = ["sodkit", *sys.argv[1:]]
raise SystemExit(console_main())
"""
SIDES = ("on", "off")  # the collector during imports: as before, and with sodkit.import_gc


def cpu_of(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read()  # type: ignore[union-attr]
    err = proc.stderr.read()  # type: ignore[union-attr]
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{cmd[:4]} failed:\n{err[-3000:]}")
    return usage.ru_utime + usage.ru_stime, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="into benchmarks/RESULTS.md")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.sod_fixtures import write_duts_layout

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    imports: dict[str, list[float]] = {side: [] for side in SIDES}
    train: dict[str, list[float]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        data = write_duts_layout(tmp / "data")
        for round_ in range(args.rounds):
            order = SIDES if round_ % 2 == 0 else SIDES[::-1]
            for side in order:
                cpu, out = cpu_of([sys.executable, "-c", IMPORTS, side], env, tmp)
                imports[side].append(float(out.strip()))
                cpu, _ = cpu_of([sys.executable, "-c", TRAIN, side, "train",
                                 str(ROOT / "configs" / "demo.yaml"), f"data_root={data}",
                                 f"output_root={tmp / 'runs'}", f"name=gc_{side}",
                                 "data.train=[{preset: duts-tr}]",
                                 "data.test=[{preset: duts-te}]", "data.size=64",
                                 "data.batch_size=4", "data.num_workers=0",
                                 "model.backbone=test_resnet", "model.decoder_channels=16",
                                 "train.epochs=2", "--overwrite"], env, tmp)
                train[side].append(cpu)
                print(f"round {round_ + 1} collector {side} in imports: imports "
                      f"{imports[side][-1]:.2f} s, train {cpu:.2f} s of CPU", flush=True)
        same = ((tmp / "runs" / "gc_on" / "results.json").read_bytes()
                == (tmp / "runs" / "gc_off" / "results.json").read_bytes())
    if not same:
        raise SystemExit("the two runs' results.json differ")
    block = report(args, imports, train)
    print(block)
    if args.write:
        path = ROOT / "benchmarks" / "RESULTS.md"
        text = path.read_text()
        pattern = re.compile(rf"<!-- {MARK} -->.*<!-- /{MARK} -->", re.S)
        text = pattern.sub(lambda _: block, text) if pattern.search(text) else \
            text.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(text)


def report(args: argparse.Namespace, imports: dict[str, list[float]],
           train: dict[str, list[float]]) -> str:
    load = os.getloadavg()[0]
    lines = [f"<!-- {MARK} -->", "### A `sodkit` process's start: the garbage collector during "
             "imports", "",
             f"Command: `.venv/bin/python benchmarks/import_gc.py --rounds {args.rounds}` "
             f"({platform.machine()}, 2 shared cores, Python {platform.python_version()}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average at the end "
             f"{load:.1f}). Median of {args.rounds} fresh processes a side, alternating; CPU "
             f"seconds:", "",
             "| what | collector on (before) | off while importing (`sodkit.import_gc`) | ratio |",
             "|---|---:|---:|---:|"]
    for name, values in (("importing what `sodkit train` runs", imports),
                         ("a whole tiny `sodkit train` (demo FPN, test_resnet, 2 epochs)",
                          train)):
        on, off = statistics.median(values["on"]), statistics.median(values["off"])
        lines.append(f"| {name} | {on:.2f} | **{off:.2f}** | {off / on:.2f} |")
    lines += ["", "Both runs' `results.json` are the same bytes.", f"<!-- /{MARK} -->"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
