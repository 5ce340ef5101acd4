"""What holds a training step's peak memory: the tensors alive at the peak, by kind, in MB.

    .venv/bin/python benchmarks/step_memory.py configs/demo.yaml [key=value ...] \\
        [--variants off all] [--json FILE]

For each ``model.checkpointing`` variant (fp32 unless overridden), one warm-up
:class:`~sodkit.engine.step.TrainStep`, then one step under ``torch.profiler`` with
``profile_memory``; its memory timeline (torch's own categories, refined by the op and Python
frames that created each tensor) gives, at the moment the most bytes are live:

- resident before the step: ``weights``, ``optimizer state``, ``batch``;
- what the step adds: ``gradients`` (of parameters), ``saved activations`` (made by the forward
  and still held for backward, loss maps apart), ``loss maps`` (made by the criterion),
  ``recomputed`` (made again by a checkpoint segment's recomputation during backward),
  ``activation gradients`` (gradients flowing through backward), ``temporaries`` (op
  workspaces, the optimizer's intermediate results, anything else),

and the op running at the peak. These are torch's allocations, so ``added`` equals what
``sodkit bench memory`` reads from the resident set (``MALLOC_MMAP_THRESHOLD_``) when the
allocator returns what it frees. The analysis uses torch's private
``torch.profiler._memory_profiler`` (torch 2.x) and takes a few tens of seconds per variant.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

KINDS = ["weights", "optimizer state", "batch", "gradients", "saved activations", "loss maps",
         "recomputed", "activation gradients", "temporaries"]
RESIDENT = KINDS[:3]


def _frames(event: Any) -> list[str]:
    """Names of ``event`` and its ancestors (ops and Python frames), innermost first."""
    names = []
    while event is not None:
        names.append(event.name)
        event = event.parent
    return names


def _creators(tree: list[Any]) -> list[tuple[int, int, Any]]:
    """(start, end, event) of every op / Python event, for finding what ran at a time."""
    spans, stack = [], list(tree)
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        if event.end_time_ns > event.start_time_ns:
            spans.append((event.start_time_ns, event.end_time_ns, event))
    return spans


def _innermost(spans: list[tuple[int, int, Any]], t: int) -> Any:
    inside = [(end - start, event) for start, end, event in spans if start <= t <= end]
    return min(inside, key=lambda pair: pair[0])[1] if inside else None


def _kind(category: str, frames: list[str], in_backward: bool) -> str:
    """One of :data:`KINDS` for a tensor of torch's ``category``, created under ``frames``."""
    fixed = {"PARAMETER": "weights", "OPTIMIZER_STATE": "optimizer state", "INPUT": "batch",
             "GRADIENT": "gradients"}
    if category in fixed:
        return fixed[category]
    if any("checkpoint.py" in f and "recompute" in f for f in frames):
        return "recomputed"
    if in_backward:
        return "activation gradients" if category == "AUTOGRAD_DETAIL" else "temporaries"
    if any("sodkit/loss/" in f for f in frames):
        return "loss maps"
    return "saved activations" if category == "ACTIVATION" else "temporaries"


def _forget(entries: list[tuple[int, int]], nbytes: int) -> None:
    """Drop the newest entry of ``nbytes``: allocations torch could not tie to a tensor all
    share one key, so the size tells them apart (temporaries die in reverse order)."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i][0] == nbytes:
            del entries[i]
            return


def _live_at_peak(profile: Any) -> tuple[dict, dict, int]:
    """What is live (key, version) -> [(bytes, created at)] when the step starts and at its
    peak, and the peak's time."""
    from torch.profiler._memory_profiler import Action

    live: dict = {}
    current = best = 0
    start: dict | None = None
    best_t, best_live = -1, {}
    for t, action, (key, version), nbytes in profile.timeline:
        if key.device.type != "cpu":
            continue
        if t != -1 and start is None:  # the step's first event: all before it pre-existed
            start = {k: list(v) for k, v in live.items()}
        if action in (Action.PREEXISTING, Action.CREATE):
            live.setdefault((key, version), []).append((nbytes, t))
            current += nbytes
        elif action == Action.INCREMENT_VERSION:
            live.setdefault((key, version + 1), []).extend(live.pop((key, version), []))
        elif action == Action.DESTROY:
            _forget(live.get((key, version), []), nbytes)
            current -= nbytes
        if current > best:
            best, best_t, best_live = current, t, {k: list(v) for k, v in live.items()}
    return start or {}, best_live, best_t


def breakdown(step: Any, batch: dict) -> dict[str, Any]:
    """Profile one ``step([batch])``; MB per kind at the peak, and the op running there."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import TensorKey

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        step([batch])
    memory = prof._memory_profile()
    spans = _creators(prof.profiler.kineto_results.experimental_event_tree())
    backward_starts = [s for s, _, e in spans if e.name.startswith("autograd::engine")]
    backward_from = min(backward_starts) if backward_starts else float("inf")
    start, peak, peak_t = _live_at_peak(memory)

    def kinds(live: dict) -> Counter:
        sizes: Counter = Counter()
        for (key, version), entries in live.items():
            category = (memory._categories.get(key, version) if isinstance(key, TensorKey)
                        else None)
            name = category.name if category is not None else "NONE"
            for nbytes, created in entries:
                frames = _frames(_innermost(spans, created)) if created > 0 else []
                sizes[_kind(name, frames, created >= backward_from)] += nbytes
        return sizes

    before, at_peak_sizes = kinds(start), kinds(peak)
    at_peak = _frames(_innermost(spans, peak_t))
    mb = 2**20
    added = {k: at_peak_sizes[k] - (0 if k in RESIDENT else before[k]) for k in KINDS}
    return {"added_mb": round(sum(at_peak_sizes.values()) / mb - sum(before.values()) / mb, 1),
            "kinds_mb": {k: round(added[k] / mb, 1) for k in KINDS},
            "op_at_peak": _describe(at_peak)}


def _describe(frames: list[str]) -> list[str]:
    """The op, the autograd node and the innermost sodkit / timm / torch.nn frame of ``frames``."""
    picks = frames[:1]
    for wanted in ("autograd::engine::evaluate_function", "nn.Module:", "sodkit/", "timm/"):
        picks += [f for f in frames if wanted in f][:1]
    return picks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--variants", nargs="+", default=["off", "all"],
                        help="model.checkpointing values to profile")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_intermixed_args()

    import torch

    from sodkit.config import load_config
    from sodkit.engine.bench import build_train_step, random_batch

    rows = []
    for variant in args.variants:
        cfg = load_config(args.config, [*args.overrides, f"model.checkpointing={variant}"])
        torch.manual_seed(0)
        step, runtime = build_train_step(cfg)
        batch = random_batch(cfg, runtime.device)
        step([batch])  # warm-up: optimizer state, allocator, kernel choice
        rows.append({"checkpointing": variant, **breakdown(step, batch)})
    print("| kind (MB at the peak) | " + " | ".join(r["checkpointing"] for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for kind in KINDS:
        mark = " (resident before the step)" if kind in RESIDENT else ""
        print(f"| {kind}{mark} | " + " | ".join(str(r["kinds_mb"][kind]) for r in rows) + " |")
    print("| **added by the step** | " + " | ".join(str(r["added_mb"]) for r in rows) + " |")
    for r in rows:
        print(f"{r['checkpointing']}: peak in {' < '.join(r['op_at_peak'])}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
