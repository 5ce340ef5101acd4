"""``sodkit serve`` under load on 127.0.0.1 vs ``sodkit predict`` on the same photos.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serve_load.py --clients 8 --seconds 20 \
        --rounds 3 --memory-requests 4000 --write

Makes ``--images`` photos (the demo's renderer, sides 240-640 px, JPEG) and a checkpoint of the
recipe's network (``configs/demo.yaml``: the demo model, random weights: speed and memory do not
depend on them), then, each step bounded in time and count, so that it stops by itself, and
with every request to 127.0.0.1 only:

0. the network alone, forward passes of 1 image and of the default max batch (ms an image);
1. ``sodkit predict`` on the folder (in this process, imports done: images/s), and on each of
   ``--latency-photos`` photos alone (load + one image: the latency of a client that runs the
   command per photo; p50/p95), and once as a new process (interpreter and imports too);
2. a server per setting (``--max-batch 1`` and the default), ``--clients`` clients sending the
   photos in turn for ``--seconds``: requests/s, p50/p95 latency, the mean batch the server
   formed; the settings alternate over ``--rounds`` rounds (medians reported), so that neither
   always runs in the other's wake on a shared machine;
3. memory: one server at the defaults answers ``--memory-requests`` requests from the clients;
   its resident memory (``VmRSS``) is sampled every 0.25 s; after the first
   ``--warmup-requests`` it must stay within 10% of what it was then.

The clients run in this process (threads on keep-alive connections), the server in its own.
Both sides use sodkit's default compute threads, or ``OMP_NUM_THREADS``: on a loaded 2-core
machine two threads spin-wait at every operator (docs/performance.md), so there
``OMP_NUM_THREADS=1`` gives the steadier figures.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from predict_speed import write_photos  # noqa: E402

from sodkit.cli import main as sodkit_main  # noqa: E402
from sodkit.config import load_config, to_dict  # noqa: E402
from sodkit.network import build_network  # noqa: E402
from sodkit.serve.settings import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_MS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
ADDRESS = re.compile(r"^serving .* on http://127\.0\.0\.1:(\d+)/")
GROWTH_BOUND = 0.10


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Served:
    """``python -m sodkit serve`` on a free port of 127.0.0.1; its log kept."""

    def __init__(self, checkpoint: Path, *args: str) -> None:
        cmd = [sys.executable, "-m", "sodkit", "serve", "--checkpoint", str(checkpoint),
               "--host", "127.0.0.1", "--port", "0", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        first = self.proc.stdout.readline()
        found = ADDRESS.match(first)
        if not found:
            self.proc.kill()
            raise SystemExit(f"sodkit serve did not start: {first}{self.proc.stdout.read()}")
        self.port = int(found.group(1))
        self.lines: list[str] = [first]
        threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True).start()

    def health(self) -> dict:
        import json

        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        connection.request("GET", "/health")
        return json.loads(connection.getresponse().read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)


def load(served: Served, photos: list[bytes], clients: int, seconds: float,
         max_requests: int, on_done: Callable[[int], None] | None = None) -> dict:
    """``clients`` threads sending the photos in turn until ``seconds`` pass or
    ``max_requests`` are answered: latencies of the 200s, counts of the others."""
    stop_at = time.monotonic() + seconds
    tickets = itertools.count()
    latencies: list[float] = []
    failures: list[int] = []

    def client(offset: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=120)
        for turn in itertools.count(offset):
            if time.monotonic() >= stop_at or next(tickets) >= max_requests:
                break
            started = time.perf_counter()
            connection.request("POST", "/predict", photos[turn % len(photos)],
                               {"Content-Type": "image/jpeg"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                latencies.append(time.perf_counter() - started)
                if on_done is not None:
                    on_done(len(latencies))
            else:
                failures.append(response.status)
                connection.close()
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i * 7,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {"requests": len(latencies), "failures": len(failures), "wall": wall,
            "rate": len(latencies) / wall, "p50": 1000 * ordered[len(ordered) // 2],
            "p95": 1000 * ordered[int(0.95 * (len(ordered) - 1))]}


def predict_side(checkpoint: Path, folder: Path, paths: list[Path], tmp: Path,
                 args: argparse.Namespace) -> dict:
    def command(inputs: list[str], out: Path) -> float:
        started = time.perf_counter()
        code = sodkit_main(["predict", *inputs, "--checkpoint", str(checkpoint), "--out",
                            str(out), "--workers", "0", "--force"])
        assert code == 0
        return time.perf_counter() - started

    command([str(paths[0])], tmp / "warm")
    folder_s = command([str(folder)], tmp / "folder")
    single = sorted(1000 * command([str(p)], tmp / "one") for p in
                    paths[: args.latency_photos])
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sodkit", "predict", str(paths[0]), "--checkpoint",
                    str(checkpoint), "--out", str(tmp / "process"), "--workers", "0"],
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return {"folder_rate": len(paths) / folder_s, "p50": single[len(single) // 2],
            "p95": single[int(0.95 * (len(single) - 1))],
            "process_s": time.perf_counter() - started}


def forward_side(net: torch.nn.Module, size: int, rounds: int) -> dict:
    """The network alone on random inputs: ms per image in forward passes of 1 image and of
    the default max batch, alternating, about a second each; medians."""
    per_image: dict[int, list[float]] = {1: [], DEFAULT_MAX_BATCH: []}
    inputs = torch.randn(DEFAULT_MAX_BATCH, 3, size, size)
    with torch.inference_mode():
        net.eval()(inputs)  # warm-up
        for index in range(2 * rounds):
            batches = (1, DEFAULT_MAX_BATCH) if index % 2 == 0 else (DEFAULT_MAX_BATCH, 1)
            for batch in batches:
                images, started = 0, time.perf_counter()
                while time.perf_counter() - started < 1.0:
                    net(inputs[:batch])
                    images += batch
                per_image[batch].append(1000 * (time.perf_counter() - started) / images)
    return {batch: statistics.median(values) for batch, values in per_image.items()}


def batching_side(checkpoint: Path, photos: list[bytes], args: argparse.Namespace) -> dict:
    settings = {"max batch 1": ["--max-batch", "1"],
                f"max batch {DEFAULT_MAX_BATCH} (default)": []}
    runs: dict[str, list[dict]] = {name: [] for name in settings}
    for index in range(args.rounds):
        order = list(settings) if index % 2 == 0 else list(reversed(settings))
        for name in order:
            served = Served(checkpoint, *settings[name])
            try:
                load(served, photos[:20], args.clients, 3.0, 10**9)  # warm-up
                before = served.health()
                loadavg = os.getloadavg()[0]
                result = load(served, photos, args.clients, args.seconds, 10**9)
                after = served.health()
            finally:
                served.stop()
            images = after["images"] - before["images"]
            result["mean_batch"] = images / max(after["batches"] - before["batches"], 1)
            result["load"] = loadavg
            runs[name].append(result)
            print(f"round {index + 1}, {name}: {result['rate']:.1f} requests/s, p50 "
                  f"{result['p50']:.0f} ms, p95 {result['p95']:.0f} ms, mean batch "
                  f"{result['mean_batch']:.2f}, {result['failures']} failed, load "
                  f"{loadavg:.1f}", flush=True)
    return runs


def memory_side(checkpoint: Path, photos: list[bytes], args: argparse.Namespace) -> dict:
    served = Served(checkpoint)
    samples: list[tuple[int, float]] = []
    done = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.25):
            samples.append((done[0], rss_mib(served.proc.pid)))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        result = load(served, photos, args.clients, args.memory_seconds, args.memory_requests,
                      on_done=lambda n: done.__setitem__(0, n))
    finally:
        stop.set()
        sampler.join()
        served.stop()
    after = [rss for count, rss in samples if count >= args.warmup_requests]
    if not after:
        raise SystemExit("the memory run ended before its warm-up: raise --memory-seconds")
    result.update(warm=after[0], peak=max(after), final=after[-1],
                  growth=max(after) / after[0] - 1.0, samples=len(samples))
    print(f"memory: {result['requests']} requests in {result['wall']:.0f} s; RSS after "
          f"{args.warmup_requests} requests {result['warm']:.0f} MiB, peak after "
          f"{result['peak']:.0f}, final {result['final']:.0f} ({100 * result['growth']:+.1f}%)",
          flush=True)
    return result


def report(args: argparse.Namespace, forward: dict, predict: dict, runs: dict, memory: dict,
           info: str) -> str:
    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    names = list(runs)
    threads = os.environ.get("OMP_NUM_THREADS")
    lines = [f"Command: `{f'OMP_NUM_THREADS={threads} ' if threads else ''}"
             f".venv/bin/python benchmarks/serve_load.py --clients {args.clients} "
             f"--seconds {args.seconds:g} --rounds {args.rounds} --memory-requests "
             f"{args.memory_requests} --write` ({info}).", "",
             "| what | requests/s (images/s) | p50 ms | p95 ms | mean batch |",
             "|---|---:|---:|---:|---:|",
             f"| `sodkit predict` on the folder ({args.images} photos, one process) | "
             f"{predict['folder_rate']:.1f} | | | 8 |",
             f"| `sodkit predict` per photo (load + one image, in a process already started) "
             f"| | {predict['p50']:.0f} | {predict['p95']:.0f} | 1 |",
             f"| `python -m sodkit predict` of one photo as a new process | | "
             f"{1000 * predict['process_s']:.0f} | | 1 |"]
    for name in names:
        lines.append(f"| `sodkit serve`, {name}, {args.clients} clients | "
                     f"{median(name, 'rate'):.1f} | {median(name, 'p50'):.0f} | "
                     f"{median(name, 'p95'):.0f} | {median(name, 'mean_batch'):.2f} |")
    gain = median(names[1], "rate") / median(names[0], "rate")
    rounds = ", ".join(f"{b['rate'] / a['rate']:.2f}x" for a, b in zip(*runs.values(), strict=True))
    loads = [r["load"] for name in names for r in runs[name]]
    verdict = "within" if memory["growth"] <= GROWTH_BOUND else "NOT within"
    lines += ["", f"- Batching: {gain:.2f}x the requests/s of max batch 1 (rounds: {rounds}; "
              f"medians of {args.rounds} alternating rounds of {args.seconds:g} s, load average "
              f"{min(loads):.1f}-{max(loads):.1f}). The network alone: "
              f"{forward[1]:.1f} ms an image in passes of 1, "
              f"{forward[DEFAULT_MAX_BATCH]:.1f} in passes of {DEFAULT_MAX_BATCH} "
              f"({forward[1] / forward[DEFAULT_MAX_BATCH]:.2f}x).",
              f"- Memory at the defaults: {memory['requests']} requests in "
              f"{memory['wall']:.0f} s ({memory['rate']:.1f}/s, {memory['failures']} failed); "
              f"resident memory {memory['warm']:.0f} MiB after the first "
              f"{args.warmup_requests}, at most {memory['peak']:.0f} MiB after them, "
              f"{memory['final']:.0f} MiB at the end: {100 * memory['growth']:+.1f}%, {verdict} "
              f"10% ({memory['samples']} samples)."]
    return "\n".join(lines) + "\n"


def write_section(block: str) -> None:
    begin, end = "<!-- serve_load -->", "<!-- /serve_load -->"
    text = RESULTS.read_text()
    wrapped = f"{begin}\n{block}{end}\n"
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + wrapped + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = (text.rstrip("\n") + "\n\n## sodkit serve: load, batching and memory\n\n"
                + wrapped)
    RESULTS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-photos", type=int, default=20)
    parser.add_argument("--memory-requests", type=int, default=4000)
    parser.add_argument("--memory-seconds", type=float, default=600.0)
    parser.add_argument("--warmup-requests", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cfg = load_config(args.config, [])
        torch.manual_seed(0)
        net = build_network(replace(cfg.model, pretrained=None))
        checkpoint = tmp / "model.pt"
        torch.save({"model": net.state_dict(), "config": to_dict(cfg)}, checkpoint)
        paths = write_photos(tmp / "photos", args.images)
        photos = [p.read_bytes() for p in paths]
        forward = forward_side(net, cfg.data.size, args.rounds)
        print(f"bare forward: {forward[1]:.1f} ms/image at batch 1, "
              f"{forward[DEFAULT_MAX_BATCH]:.1f} at batch {DEFAULT_MAX_BATCH}", flush=True)
        predict = predict_side(checkpoint, tmp / "photos", paths, tmp, args)
        print(f"predict: folder {predict['folder_rate']:.1f} images/s; one photo p50 "
              f"{predict['p50']:.0f} ms, p95 {predict['p95']:.0f} ms; new process "
              f"{predict['process_s']:.1f} s", flush=True)
        runs = batching_side(checkpoint, photos, args)
        memory = memory_side(checkpoint, photos, args)
    info = (f"{cfg.model.name}/{cfg.model.backbone} at {cfg.data.size} px, random weights, "
            f"{args.images} JPEG photos of 240-640 px; default max wait "
            f"{DEFAULT_MAX_WAIT_MS:g} ms; {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} shared cores, {time.strftime('%Y-%m-%d %H:%M')}")
    text = report(args, forward, predict, runs, memory, info)
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
