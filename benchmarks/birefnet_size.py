"""BiRefNet's size: sodkit's ``birefnet`` against the original code, parameters and FLOPs, with
the deformable convolutions and the attention counted (issue 24, "Size").

    git -C /path/to/BiRefNet.git archive HEAD | tar -x -C /tmp/BiRefNet   # a checkout
    pip install --target /tmp/birefnet-deps einops kornia                 # what it imports
    python benchmarks/birefnet_size.py --repo /tmp/BiRefNet --deps /tmp/birefnet-deps \\
        --run swin_v1_l:1024 --run swin_v1_t:1024 --run pvt_v2_b0:1024

Both networks are built on the meta device (shapes only: a Swin-L at 1024 px counts in seconds)
and run one eval-mode forward of one image under ``torch.utils.flop_counter`` twice: plainly,
and with sodkit's formulas for the ops it misses (:mod:`sodkit.engine.flops`: deformable
convolution everywhere; the CPU's fused attention, which the original's Swin and PVTv2 use
with ``SDPA_enabled`` and timm's PVTv2 too). A third, analytic count of those two parts comes
from the architecture alone (:func:`analytic_deform`, :func:`analytic_attention`), not from
running either code. Prints one JSON line per run; exits 1 when the parameters differ by more
than 1% or the FLOPs by more than 2%.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from birefnet_parity import TIMM, _original, _select_backbone  # noqa: E402

# the original's backbones: (embed widths, depths, window) for Swin; (widths, depths, spatial
# reduction ratios) for PVTv2 (its models/backbones/swin_v1.py and pvt_v2.py; timm's are equal)
SWIN = {"swin_v1_t": ((96, 192, 384, 768), (2, 2, 6, 2), 7),
        "swin_v1_s": ((96, 192, 384, 768), (2, 2, 18, 2), 7),
        "swin_v1_b": ((128, 256, 512, 1024), (2, 2, 18, 2), 12),
        "swin_v1_l": ((192, 384, 768, 1536), (2, 2, 18, 2), 12)}
PVT_DEPTHS = {0: (2, 2, 2, 2), 1: (2, 2, 2, 2), 2: (3, 4, 6, 3), 3: (3, 4, 18, 3),
              4: (3, 8, 27, 3), 5: (3, 6, 40, 3)}
DECODER_INNER, BRANCH, KERNELS = 64, 256, (1, 1, 3, 7)  # ASPPDeformable in every decoder block


def analytic_deform(size: int) -> int:
    """The deformable convolutions: ASPPDeformable (64 -> 256 channels, kernels 1, 1, 3, 7) in
    the four decoder blocks (maps at strides 4-32) and in the squeeze block (stride 32); each
    is 2 x pixels x C_out x C_in x k^2."""
    taps = sum(k * k for k in KERNELS)
    pixels = sum((size // s) ** 2 for s in (4, 8, 16, 32, 32))
    return 2 * pixels * BRANCH * DECODER_INNER * taps


def _swin_attention(name: str, side: int) -> int:
    """Window attention: per block, windows x (Q K^T + P V) = 4 x padded tokens x N x C."""
    widths, depths, window = SWIN[name]
    total = 0
    for i, (width, depth) in enumerate(zip(widths, depths, strict=True)):
        tokens = side // 4 // 2 ** i
        padded = math.ceil(tokens / window) * window  # padded to whole windows, every stage
        total += depth * 4 * padded * padded * window * window * width
    return total


def _pvt_attention(name: str, side: int) -> int:
    """Spatial-reduction attention: per block 4 x N_q x N_kv x C, N_kv = (side / sr)^2."""
    variant = int(name[-1])
    widths = (32, 64, 160, 256) if variant == 0 else (64, 128, 320, 512)
    total = 0
    for i, (width, depth, ratio) in enumerate(zip(widths, PVT_DEPTHS[variant], (8, 4, 2, 1),
                                                  strict=True)):
        tokens = math.ceil(side / 4 / 2 ** i)
        kv = math.ceil(tokens / ratio) if ratio > 1 else tokens
        total += depth * 4 * tokens * tokens * kv * kv * width
    return total


def analytic_attention(name: str, size: int) -> int:
    """The backbone's attention products on the image and on its half-size copy
    (``mul_scl_ipt: cat``)."""
    count = _swin_attention if name.startswith("swin") else _pvt_attention
    return count(name, size) + count(name, size // 2)


def _counts(model: nn.Module, size: int) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    from sodkit.engine.flops import counter

    image = torch.zeros(1, 3, size, size, device="meta")
    model.eval()
    out = {"params": sum(p.numel() for p in model.parameters())}
    for key, mode in (("plain", FlopCounterMode(display=False)), ("full", counter())):
        with torch.no_grad(), mode:
            model(image)
        out[key] = mode.get_total_flops()
        out[f"{key}_by_op"] = {str(op): int(n) for op, n in
                               mode.get_flop_counts()["Global"].items()}
    return out


def compare(checkout: Path, backbone: str, size: int) -> dict:
    from sodkit.config.schema import ModelCfg  # noqa: PLC0415
    from sodkit.network import build_network  # noqa: PLC0415

    with torch.device("meta"):  # built there; run outside (the original makes CPU scalars)
        original = _original(checkout)
        network = build_network(ModelCfg(name="birefnet", backbone=TIMM[backbone]))
    theirs, ours = _counts(original, size), _counts(network, size)
    deform = analytic_deform(size)
    attention = analytic_attention(backbone, size)
    by_op = ours["full_by_op"]
    attention_ours = by_op.get("aten.bmm", 0) + by_op.get(
        "aten._scaled_dot_product_flash_attention_for_cpu", 0)
    return {
        "backbone": backbone, "size": size,
        "params_original": theirs["params"], "params_sodkit": ours["params"],
        "flops_original": theirs["full"], "flops_sodkit": ours["full"],
        "flops_original_plain_counter": theirs["plain"],
        "flops_sodkit_plain_counter": ours["plain"],
        "deform_analytic": deform, "deform_counted": by_op.get("torchvision.deform_conv2d", 0),
        "attention_analytic": attention, "attention_counted_sodkit": attention_ours,
        "original_by_op": theirs["full_by_op"], "sodkit_by_op": by_op,
    }


def _one(args: argparse.Namespace) -> int:
    backbone, size = args.one.split(":")
    if args.deps:
        sys.path.insert(0, str(args.deps))
    with tempfile.TemporaryDirectory(prefix="birefnet-original-") as tmp:
        checkout = Path(tmp) / "BiRefNet"
        shutil.copytree(args.repo, checkout, ignore=shutil.ignore_patterns(".git"))
        _select_backbone(checkout, backbone)
        figures = compare(checkout, backbone, int(size))
    print(json.dumps(figures))
    return 0


def _check(figures: dict) -> bool:
    def giga(key: str) -> str:
        return f"{figures[key] / 1e9:.2f} G"

    params = abs(figures["params_sodkit"] / figures["params_original"] - 1)
    flops = abs(figures["flops_sodkit"] / figures["flops_original"] - 1)
    print(f"{figures['backbone']} {figures['size']} px: parameters {figures['params_sodkit']:,} "
          f"vs {figures['params_original']:,} ({params:.3%}); FLOPs {giga('flops_sodkit')} vs "
          f"{giga('flops_original')} ({flops:.3%}); without the extra formulas "
          f"{giga('flops_sodkit_plain_counter')} vs {giga('flops_original_plain_counter')}; "
          f"deformable conv {giga('deform_counted')} counted, {giga('deform_analytic')} "
          f"analytic; attention {giga('attention_counted_sodkit')} counted, "
          f"{giga('attention_analytic')} analytic")
    return params <= 0.01 and flops <= 0.02


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of BiRefNet")
    parser.add_argument("--deps", type=Path, help="a folder with einops and kornia")
    parser.add_argument("--run", action="append", default=[], metavar="BACKBONE:SIZE",
                        help="e.g. swin_v1_l:1024 (repeatable)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process of one --run
    args = parser.parse_args()
    if args.one:
        return _one(args)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    ok = True
    for run in args.run or ["swin_v1_l:1024"]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--repo", str(args.repo.resolve()),
               "--one", run]
        if args.deps:
            cmd += ["--deps", str(args.deps.resolve())]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return 1
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(json.dumps(figures))
        ok = _check(figures) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
