"""BiRefNet's original code against sodkit's ``birefnet``, with random weights in the original's
tensor names: the check that it is the published network, not a look-alike.

    git -C /path/to/BiRefNet.git archive HEAD | tar -x -C /tmp/BiRefNet   # a checkout
    pip install --target /tmp/birefnet-deps einops kornia                 # what it imports
    python benchmarks/birefnet_parity.py --repo /tmp/BiRefNet --deps /tmp/birefnet-deps \\
        --run swin_v1_t:512 --run pvt_v2_b0:512 --run swin_v1_l:1024

For each ``--run BACKBONE:SIZE`` a fresh process copies the checkout to a temporary folder,
selects the backbone in its ``config.py`` (everything else as released: the general model's
settings, batch size 8 so BatchNorm is on) and builds ``BiRefNet(bb_pretrained=False)`` with
the original's own Swin / PVTv2 code. Every parameter the original initialises to a constant
(norm layers, biases, the deformable convolutions' zero offset and modulator convolutions) and
BatchNorm's running statistics are randomised, so that every path carries signal. The tensors
are renamed by :mod:`sodkit.published.birefnet` (the rename ``import-weights`` uses) and loaded
strictly into sodkit's network (timm backbone). Compared, on one random image:

- eval mode: the logits (the original's only output);
- training mode (dropout and the original's drop-path off, both random; BatchNorm on its
  running statistics, see :func:`_training_paths`): the logits, the three side outputs, the
  gradient predictions and their targets (which include kornia's Laplacian, the real one).

Prints parameter counts and the largest differences; exits 1 when one exceeds ``--atol``.

``--predict BACKBONE:SIZE`` instead checks ``import-weights`` + ``predict`` against the
original's own inference (issue 24 item 3): the original (``config.py``: that backbone,
``mixed_precision`` 'no' and ``device`` 'cpu', nothing else changed), randomised as above, is
saved as its training script saves it (a ``.pth`` state dict under ``torch.compile``'s
``_orig_mod.`` prefix); its ``inference.py`` ``inference()`` runs on generated JPEG photos of
mixed sizes through its own test ``MyData`` at SIZE x SIZE (``path_to_image``: cv2 read and
bilinear resize; Normalize; sigmoid; aligned-corner upsampling; ``ToPILImage``), loading the
file with its ``check_state_dict``; ``sodkit import-weights birefnet`` (backbone recognised
from the file; a stand-in recipe at ``data.size`` SIZE, as the published one is not the point
here) and ``sodkit predict`` make masks of the same photos. Compared pixel by pixel: equal to
1/255 on at least 99.9% of pixels, or exit 1.

``--record-backbones FILE`` instead writes the state-dict names and shapes of every backbone of
the original (Swin v1 T/S/B/L, PVTv2 b0-b5, its own classes built on the meta device, under the
``bb.`` prefix of ``BiRefNet``), gzipped: the fixture of ``tests/test_birefnet_import.py``,
which checks that ``import-weights birefnet`` recognises each.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from sodkit.published.birefnet import TIMM  # the original's backbone names -> timm's

EXACT = ("equal", "within_1/255")  # shares of pixels: printed unrounded


def _select_backbone(checkout: Path, backbone: str) -> None:
    """Point the copy's ``config.py`` at ``backbone`` (its ``self.bb = [...][i]``)."""
    path = checkout / "config.py"
    text = path.read_text()
    match = re.search(r"self\.bb = \[(.*?)\]\[(\d+)\]", text, flags=re.S)
    if match is None:
        raise SystemExit(f"{path}: no `self.bb = [...][i]` line")
    names = re.findall(r"'(\w+)'", match.group(1))
    if backbone not in names:
        raise SystemExit(f"{backbone!r} is not one of the original's backbones {names}")
    start, end = match.span(2)
    path.write_text(text[:start] + str(names.index(backbone)) + text[end:])


def _original(checkout: Path) -> nn.Module:
    os.chdir(checkout)  # its config.py reads ./train.sh
    sys.path.insert(0, str(checkout))
    from models.birefnet import BiRefNet  # noqa: PLC0415 (the original's own package)

    return BiRefNet(bb_pretrained=False)


def _randomise(model: nn.Module) -> None:
    """Constant-initialised parameters and BatchNorm statistics -> random values."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.numel() > 1 and bool(p.min() != p.max()):
                continue
            if "offset_conv" in name or "modulator_conv" in name:
                if name.endswith("bias"):
                    p.uniform_(-1.0, 1.0)  # offsets of up to a pixel
                else:
                    p.normal_(0.0, 0.01)
            elif p.ndim == 1 and name.endswith("weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.uniform_(-0.1, 0.1)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)


def _training_paths(model: nn.Module) -> nn.Module:
    """Training mode for the training-only outputs, with dropout and drop-path off (random)
    and BatchNorm on its running statistics: with batch statistics over two images the
    image-pooled ASPP branch normalises two values a channel, which turns float round-off
    into differences of up to 3e-4 (PVTv2-b0, 512 px)."""
    model.train()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if hasattr(m, "drop_prob"):
            m.drop_prob = 0.0
        if isinstance(m, nn.BatchNorm2d):
            m.eval()
    return model


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        raise SystemExit(f"shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    return (a - b).abs().max().item()


def compare(checkout: Path, backbone: str, size: int, batch: int) -> dict:
    from sodkit.config.schema import ModelCfg  # noqa: PLC0415
    from sodkit.network import build_network  # noqa: PLC0415
    from sodkit.published.birefnet import rename_for  # noqa: PLC0415

    torch.manual_seed(0)
    original = _original(checkout)
    _randomise(original)
    ours = build_network(ModelCfg(name="birefnet", backbone=TIMM[backbone]))
    rename = rename_for("swin" if backbone.startswith("swin") else "pvt")
    renamed = {rename(k): v for k, v in original.state_dict().items()}
    renamed.pop("", None)
    mine = ours.state_dict()
    unknown, missing = sorted(set(renamed) - set(mine)), sorted(set(mine) - set(renamed))
    if unknown or missing:
        raise SystemExit(f"names do not match: original only {unknown[:5]}, sodkit only "
                         f"{missing[:5]}")
    ours.load_state_dict(renamed, strict=True)
    ours.set_gradient_outputs(True)  # the gradient maps, for the comparison in training mode
    x = torch.randn(batch, 3, size, size)
    figures: dict = {
        "backbone": backbone, "size": size, "batch": batch,
        "params_original": sum(p.numel() for p in original.parameters()),
        "params_sodkit": sum(p.numel() for p in ours.parameters())}
    with torch.no_grad():
        theirs = original.eval()(x)[-1]
        figures["eval logits"] = _max_diff(theirs, ours.eval()(x)["logits"])
        figures["scale"] = theirs.abs().max().item()
        (grads, targets), outs = _training_paths(original)(x)[0]
        out = _training_paths(ours)(x)
    figures["train logits"] = _max_diff(outs[-1], out["logits"])
    figures["train side outputs"] = max(map(_max_diff, outs[:-1], out["aux"]))
    figures["train gradient"] = max(map(_max_diff, grads, out["gradient"]))
    figures["train gradient_target"] = max(map(_max_diff, targets, out["gradient_target"]))
    return figures


def record_backbones(checkout: Path, out: Path) -> None:
    """Every backbone's ``bb.`` names and shapes, from the original's own classes."""
    with tempfile.TemporaryDirectory(prefix="birefnet-original-") as tmp:
        copy = Path(tmp) / "BiRefNet"
        shutil.copytree(checkout, copy, ignore=shutil.ignore_patterns(".git"))
        os.chdir(copy)
        sys.path.insert(0, str(copy))
        from models.backbones import pvt_v2, swin_v1  # noqa: PLC0415 (the original's)

        keys = {"_source": "ZhengPeng7/BiRefNet models/backbones/swin_v1.py, pvt_v2.py: "
                           "state_dict() of each backbone class (meta device), prefixed bb. "
                           "as in BiRefNet; written by benchmarks/birefnet_parity.py "
                           "--record-backbones"}
        with torch.device("meta"):
            for name in TIMM:
                module = getattr(swin_v1 if name.startswith("swin") else pvt_v2, name)()
                keys[name] = {f"bb.{k}": list(v.shape) for k, v in module.state_dict().items()}
    with gzip.open(out, "wt") as f:
        json.dump(keys, f, separators=(",", ":"))
    print(f"recorded {', '.join(f'{k}: {len(v)}' for k, v in keys.items() if k[0] != '_')} "
          f"tensors in {out}")


def _config_for_cpu(checkout: Path) -> None:
    """The copy's ``config.py`` in fp32 on the CPU (its inference casts to bf16 on CUDA)."""
    path = checkout / "config.py"
    text = path.read_text()
    for before, after in (("['no', 'fp16', 'bf16', 'fp8'][2]", "['no', 'fp16', 'bf16', 'fp8'][0]"),
                          ("self.device = [0, 'cpu'][0]", "self.device = [0, 'cpu'][1]")):
        if before not in text:
            raise SystemExit(f"{path}: no `{before}`")
        text = text.replace(before, after)
    path.write_text(text)


def predict_parity(checkout: Path, backbone: str, size: int, count: int, tmp: Path) -> dict:
    from import_parity import SIZES, _photo, compare, sodkit_main  # noqa: PLC0415

    photos, data = tmp / "photos", tmp / "data" / "DIS5K" / "bench"
    for folder in (photos, data / "im", data / "gt"):
        folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        height, width = SIZES[i % len(SIZES)]
        if i % 2:  # every other one larger than the network's input: shrunk, not enlarged
            height, width = height * 3, width * 3
        image = _photo(rng, height, width)[:, :, ::-1]
        for folder in (photos, data / "im"):
            cv2.imwrite(str(folder / f"photo_{i:02d}.jpg"), image, [cv2.IMWRITE_JPEG_QUALITY, 90])
        cv2.imwrite(str(data / "gt" / f"photo_{i:02d}.png"), np.zeros((height, width), np.uint8))
    torch.manual_seed(0)
    original = _original(checkout)
    _randomise(original)
    release = tmp / "BiRefNet-epoch_1.pth"
    torch.save({f"_orig_mod.{k}": v for k, v in original.state_dict().items()}, release)
    import dataset  # noqa: PLC0415 (the original's own modules)
    import inference  # noqa: PLC0415
    from utils import check_state_dict  # noqa: PLC0415

    dataset.config.data_root_dir = str(tmp / "data")  # MyData reads <root>/<task>/<set>/im, gt
    original.load_state_dict(check_state_dict(torch.load(release, weights_only=True)))
    loader = torch.utils.data.DataLoader(dataset.MyData("bench", data_size=(size, size),
                                                        is_train=False), batch_size=1)
    inference.inference(original.eval(), loader, pred_root=str(tmp / "preds"),
                        method="original", testset="bench", device="cpu")
    recipe = tmp / "recipe.yaml"
    recipe.write_text(f"name: birefnet\nmodel: {{name: birefnet, backbone: "
                      f"swin_large_patch4_window12_384}}\ndata: {{size: {size}}}\n")
    model, ours = tmp / "birefnet.safetensors", tmp / "sodkit"
    for argv in (["import-weights", "birefnet", str(release), "--out", str(model), "--recipe",
                  str(recipe)],
                 ["predict", str(photos), "--checkpoint", str(model), "--out", str(ours),
                  "--device", "cpu", "--batch-size", "2", "--workers", "0"]):
        if sodkit_main(argv) != 0:
            raise SystemExit(f"sodkit {' '.join(argv)} failed")
    return {"backbone": backbone, "size": size, **compare(tmp / "preds" / "original" / "bench",
                                                          ours)}


def _one(args: argparse.Namespace) -> int:
    backbone, size = args.one.split(":")
    if args.deps:
        sys.path.insert(0, str(args.deps))
    with tempfile.TemporaryDirectory(prefix="birefnet-original-") as tmp:
        checkout = Path(tmp) / "BiRefNet"
        shutil.copytree(args.repo, checkout, ignore=shutil.ignore_patterns(".git"))
        _select_backbone(checkout, backbone)
        if args.predict_one:
            _config_for_cpu(checkout)
            figures = predict_parity(checkout, backbone, int(size), args.images, Path(tmp))
        else:
            figures = compare(checkout, backbone, int(size), args.batch)
    print(json.dumps(figures))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of BiRefNet")
    parser.add_argument("--deps", type=Path, help="a folder with einops and kornia")
    parser.add_argument("--run", action="append", default=[], metavar="BACKBONE:SIZE",
                        help="e.g. swin_v1_t:512 (repeatable)")
    parser.add_argument("--batch", type=int, default=2,
                        help="images per batch (training-mode BatchNorm needs 2)")
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process of one --run
    parser.add_argument("--predict", action="append", default=[], metavar="BACKBONE:SIZE",
                        help="import-weights + predict against the original's inference.py, "
                             "e.g. pvt_v2_b0:1024 (repeatable)")
    parser.add_argument("--images", type=int, default=6, help="photos for --predict")
    parser.add_argument("--predict-one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--record-backbones", type=Path, metavar="FILE.json.gz",
                        help="write every backbone's names and shapes (the tests' fixture)")
    args = parser.parse_args()
    if args.record_backbones:
        if args.deps:
            sys.path.insert(0, str(args.deps.resolve()))
        record_backbones(args.repo.resolve(), args.record_backbones.resolve())
        return 0
    if args.one:
        return _one(args)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    worst, within = 0.0, 1.0
    runs = [(run, False) for run in args.run] + [(run, True) for run in args.predict]
    for run, predict in runs or [("swin_v1_t:512", False), ("pvt_v2_b0:512", False)]:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--repo", str(args.repo.resolve()),
               "--one", run, "--batch", str(args.batch), "--images", str(args.images)]
        cmd += ["--deps", str(args.deps.resolve())] if args.deps else []
        cmd += ["--predict-one"] if predict else []
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stdout + done.stderr, file=sys.stderr)
            return 1
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print({k: (float(f"{v:.3g}") if isinstance(v, float) and k not in EXACT else v)
               for k, v in figures.items()})
        if predict:
            within = min(within, figures["within_1/255"])
        else:
            worst = max(worst, *(v for k, v in figures.items() if k.startswith(("eval", "train"))))
    if args.run or not args.predict:
        print(f"largest output difference: {worst:.3g} (atol {args.atol:g})")
    if args.predict:
        print(f"masks equal to 1/255 on {within:.4%} of pixels (bound: 99.9%)")
    return 0 if worst <= args.atol and within >= 0.999 else 1


if __name__ == "__main__":
    sys.exit(main())
