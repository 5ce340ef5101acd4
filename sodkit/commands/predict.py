"""``sodkit predict``: saliency masks for image files and folders with a trained checkpoint."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ._common import load_weights

HELP = "predict saliency masks for images (files or folders), each at its own resolution"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="image files and/or folders")
    parser.add_argument("--checkpoint", required=True, help="a .pt file written by sodkit train")
    parser.add_argument("--out", required=True, help="folder for the <stem>.png masks")
    parser.add_argument("--size", type=int, help="network input side (default: the training size)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="image decoding processes")


def run(args: argparse.Namespace) -> int:
    from ..config import Config, RuntimeCfg, from_dict
    from ..data import build_test_transform
    from ..engine.predictor import collect_inputs, predict_files
    from ..engine.runtime import Runtime, load_checkpoint
    from ..network import build_network

    paths = collect_inputs(args.inputs)
    state = load_checkpoint(args.checkpoint)
    cfg = from_dict(Config, state["config"], prefix="")
    runtime = Runtime(RuntimeCfg(device=args.device, precision="fp32", seed=cfg.runtime.seed))
    model = build_network(replace(cfg.model, pretrained=None))  # weights come from the checkpoint
    load_weights(model, state, Path(args.checkpoint))
    model = model.to(runtime.device)
    transform = build_test_transform(cfg.data, size=args.size)
    try:
        predict_files(model, paths, transform, runtime, Path(args.out),
                      batch_size=args.batch_size, num_workers=min(args.workers, len(paths)))
    finally:
        runtime.close()
    return 0
