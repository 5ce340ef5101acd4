"""Import parity: ``sodkit import-weights`` + ``sodkit predict`` give the masks that the authors'
own inference code gives, on the same images, with the same (random) weights.

    python benchmarks/import_parity.py --minet MINet/code --f3net F3Net/src [--images 12]

``--minet`` is the ``code/`` folder of github.com/lartpang/MINet, ``--f3net`` the ``src/``
folder of github.com/weijun88/F3Net (neither is a dependency of sodkit). For each:

1. the original network is built with its own random initialisation (no pretrained download),
   its BatchNorm statistics and affine parameters randomised too, and its state dict saved as
   the release was: torch's legacy (pre-1.6) file format, and for F3Net apex O2's float16
   tensors beside float32 BatchNorms (MINet's is a plain state dict: its inference script
   loads it as it is);
2. photos of mixed sizes are generated (JPEG, smooth shapes and texture, 150 to 720 pixels a
   side) in each original's test layout;
3. the original's own inference runs on them: MINet's ``tools/inference.py`` ``inference()``
   (its PIL resize, Normalize, sigmoid, ``to_pil_image``, nearest resize back), F3Net's
   ``src/test.py`` ``Test(...).save()`` (its cv2 read, float64 normalisation, cv2 resize,
   upsampling to the image size inside the network, ``np.round``), each unchanged, on the CPU;
4. ``sodkit import-weights`` converts the saved file, ``sodkit predict`` predicts the photos;
5. the PNGs are compared pixel by pixel. The bound (issue #23): equal to 1/255 on at least
   99.9% of the pixels. Exits 1 if either network misses it.

``--record FILE`` also writes the originals' state-dict keys and shapes (the fixture of
``tests/test_import_weights.py``, which checks the import without the originals).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import types
from collections import OrderedDict
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from sodkit.cli import main as sodkit_main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from original_parity import _original_f3net, _original_minet  # noqa: E402

SIZES = [(240, 320), (320, 240), (480, 640), (375, 500), (320, 320), (352, 352), (150, 410),
         (720, 540), (199, 263), (512, 384), (300, 300), (427, 640)]  # (height, width)


def _photo(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A smooth random background, a few filled shapes and grain: RGB uint8."""
    base = rng.uniform(0, 255, size=(4, 5, 3)).astype(np.float32)
    image = cv2.resize(base, (width, height), interpolation=cv2.INTER_CUBIC)
    for _ in range(rng.integers(1, 4)):
        center = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        axes = (int(rng.integers(10, width // 2)), int(rng.integers(10, height // 2)))
        colour = [float(c) for c in rng.uniform(0, 255, size=3)]
        cv2.ellipse(image, center, axes, float(rng.uniform(0, 180)), 0, 360, colour, -1)
    image += rng.normal(0, 12, size=image.shape).astype(np.float32)
    return np.clip(image, 0, 255).astype(np.uint8)


def make_photos(count: int, minet_root: Path, f3net_root: Path) -> Path:
    """The same JPEGs in MINet's (Image/, Mask/) and F3Net's (image/, mask/, test.txt) layout,
    and a plain folder for ``sodkit predict``; returns that folder."""
    rng = np.random.default_rng(0)
    plain = minet_root.parent / "photos"
    for folder in (plain, minet_root / "Image", minet_root / "Mask", f3net_root / "image",
                   f3net_root / "mask"):
        folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        height, width = SIZES[i % len(SIZES)]
        name = f"photo_{i:02d}"
        data = cv2.imencode(".jpg", _photo(rng, height, width)[:, :, ::-1],
                            [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
        mask = cv2.imencode(".png", np.zeros((height, width), np.uint8))[1].tobytes()
        for folder in (plain, minet_root / "Image", f3net_root / "image"):
            (folder / f"{name}.jpg").write_bytes(data)
        for folder in (minet_root / "Mask", f3net_root / "mask"):
            (folder / f"{name}.png").write_bytes(mask)
        names.append(name)
    (f3net_root / "test.txt").write_text("".join(f"{n}\n" for n in names))
    return plain


def randomise(model: nn.Module) -> None:
    """BatchNorm statistics and affine parameters drawn afresh (the convs keep the random
    initialisation the original gives them): eval mode then tests every tensor."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)


def f3net_release(model: nn.Module) -> OrderedDict:
    """As apex O2 leaves a model: float16 but for BatchNorm (keep_batchnorm_fp32)."""
    norms = {name for name, m in model.named_modules() if isinstance(m, nn.BatchNorm2d)}
    state = OrderedDict()
    for key, value in model.state_dict().items():
        owner = key.rsplit(".", 1)[0]
        state[key] = value if owner in norms or not value.is_floating_point() else value.half()
    return state


@contextlib.contextmanager
def _cwd(path: Path):
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run_minet_original(code: Path, weights: Path, data: Path, out: Path) -> Path:
    """MINet's ``tools/inference.py`` ``inference()`` as published (CPU, no loader workers)."""
    sys.modules.setdefault("prefetch_generator", types.SimpleNamespace(BackgroundGenerator=iter))
    _original_minet(code)  # its path, the no-download ResNet-50
    sys.path.insert(0, str(code / "tools"))
    import config  # noqa: PLC0415 (the original's own modules)

    config.arg_config["num_workers"] = 0
    import inference  # noqa: PLC0415

    inference.inference(model_name="MINet_Res50", state_path=str(weights), save_root=str(out),
                        input_size=320, dataset_info=OrderedDict({"bench": str(data)}))
    return out / "bench"


def run_f3net_original(src: Path, work: Path, data: Path) -> Path:
    """F3Net's ``src/test.py`` ``Test(dataset, F3Net, path).save()`` as published, its
    ``.cuda()`` calls made no-ops so that it runs on the CPU; it reads ``./out/model-32``."""
    sys.modules.setdefault("tensorboardX", types.SimpleNamespace(SummaryWriter=None))
    _original_f3net(src)  # its path, no ResNet file
    os.environ.setdefault("MPLBACKEND", "Agg")  # the script imports pyplot
    spec = importlib.util.spec_from_file_location("f3net_test", src / "test.py")
    f3test = importlib.util.module_from_spec(spec)  # not "test": the standard library's
    spec.loader.exec_module(f3test)

    nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    f3test.DataLoader = _serial(f3test.DataLoader)
    with _cwd(work):
        f3test.Test(f3test.dataset, f3test.F3Net, str(data)).save()
    return work.parent / "eval" / "maps" / "F3Net" / data.name


def _serial(loader_class):
    """The script's DataLoader without its 8 worker processes (same batches)."""
    return lambda *args, **kwargs: loader_class(*args, **{**kwargs, "num_workers": 0})


def sodkit_predict(fmt: str, weights: Path, photos: Path, tmp: Path) -> Path:
    model = tmp / f"{fmt}.safetensors"
    out = tmp / f"{fmt}-sodkit"
    for argv in (["import-weights", fmt, str(weights), "--out", str(model)],
                 ["predict", str(photos), "--checkpoint", str(model), "--out", str(out),
                  "--device", "cpu", "--batch-size", "4", "--workers", "0"]):
        if sodkit_main(argv) != 0:
            raise SystemExit(f"sodkit {' '.join(argv)} failed")
    return out


def compare(original: Path, ours: Path) -> dict[str, float]:
    pixels = equal = within = worst = 0
    files = sorted(original.glob("*.png"))
    if not files:
        raise SystemExit(f"the original wrote no masks in {original}")
    for path in files:
        a = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE).astype(np.int16)
        b = cv2.imread(str(ours / path.name), cv2.IMREAD_GRAYSCALE).astype(np.int16)
        if a.shape != b.shape:
            raise SystemExit(f"{path.name}: original {a.shape}, sodkit {b.shape}")
        diff = np.abs(a - b)
        pixels += diff.size
        equal += int((diff == 0).sum())
        within += int((diff <= 1).sum())
        worst = max(worst, int(diff.max()))
    return {"images": len(files), "pixels": pixels, "equal": equal / pixels,
            "within_1/255": within / pixels, "max_diff/255": worst}


def record(path: Path, minet: Path | None, f3net: Path | None) -> None:
    keys: dict[str, object] = {"_source": (
        "state_dict() keys and shapes of the originals, written by benchmarks/import_parity.py "
        "--record: lartpang/MINet 0f4ecf7 code/network/MINet.py MINet_Res50(), "
        "weijun88/F3Net eecace3 src/net.py F3Net()")}
    if minet:
        keys["minet-r50"] = [[k, list(v.shape)] for k, v in _original_minet(minet)
                             .state_dict().items()]
    if f3net:
        keys["f3net-r50"] = [[k, list(v.shape)] for k, v in _original_f3net(f3net)
                             .state_dict().items()]
    path.write_text(json.dumps(keys, separators=(",", ":")) + "\n")
    print(f"recorded {', '.join(f'{k}: {len(v)} tensors' for k, v in keys.items() if k[0] != '_')}"
          f" in {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minet", type=Path, help="lartpang/MINet's code/ folder")
    parser.add_argument("--f3net", type=Path, help="weijun88/F3Net's src/ folder")
    parser.add_argument("--images", type=int, default=12)
    parser.add_argument("--record", type=Path, help="write the originals' keys and shapes here")
    args = parser.parse_args()
    if args.record:
        record(args.record, args.minet, args.f3net)
        return 0
    torch.set_grad_enabled(False)
    ok = True
    with tempfile.TemporaryDirectory(prefix="import_parity_") as tmp_name:
        tmp = Path(tmp_name)
        photos = make_photos(args.images, tmp / "minet_data", tmp / "f3net" / "data" / "bench")
        if args.minet:
            torch.manual_seed(1)
            model = _original_minet(args.minet.resolve())
            randomise(model)
            release = tmp / "MINet_Res50.pth"
            torch.save(model.state_dict(), release, _use_new_zipfile_serialization=False)
            del model
            theirs = run_minet_original(args.minet.resolve(), release, tmp / "minet_data",
                                        tmp / "minet_original")
            ours = sodkit_predict("minet-r50", release, photos, tmp)
            figures = compare(theirs, ours)
            print("minet-r50", figures)
            ok &= figures["within_1/255"] >= 0.999
            release.unlink()
        if args.f3net:
            torch.manual_seed(2)
            model = _original_f3net(args.f3net.resolve())
            randomise(model)
            work = tmp / "f3net" / "src"
            (work / "out").mkdir(parents=True)
            release = work / "out" / "model-32"
            torch.save(f3net_release(model), release, _use_new_zipfile_serialization=False)
            del model
            theirs = run_f3net_original(args.f3net.resolve(), work, tmp / "f3net" / "data" /
                                        "bench")
            ours = sodkit_predict("f3net-r50", release, photos, tmp)
            figures = compare(theirs, ours)
            print("f3net-r50", figures)
            ok &= figures["within_1/255"] >= 0.999
    print(f"bound: equal to 1/255 on >= 99.9% of pixels: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
