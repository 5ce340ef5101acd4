"""Load the authors' released MINet_Res50 and F3Net weights into sodkit's ``minet`` / ``f3net`` and
compare the outputs: the check that they are the published networks, not look-alikes.

    python benchmarks/original_parity.py --minet /path/to/MINet/code --f3net /path/to/F3Net/src

``--minet`` is the ``code/`` folder of a checkout of github.com/lartpang/MINet, ``--f3net`` the
``src/`` folder of github.com/weijun88/F3Net (neither is a dependency of sodkit). Both originals
are built without pretrained weights (their downloads and file loads are switched off here),
their BatchNorm statistics and affine parameters are randomised so that eval mode tests them,
every tensor of their state dict is renamed to sodkit's name (by ``sodkit.published``: the
renames ``sodkit import-weights`` uses) and loaded (strict: nothing may be left over on either
side but MINet's optional side heads), and one batch goes through both.
Prints parameter counts and the largest output difference; exits 1 when any exceeds ``--atol``.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from sodkit.config.schema import ModelCfg
from sodkit.network import build_network
from sodkit.published.f3net import f3net_key
from sodkit.published.minet import minet_key


def _original_minet(code: Path) -> nn.Module:
    sys.path.insert(0, str(code))
    # its VGG module imports a torchvision path that newer releases dropped
    sys.modules.setdefault("torchvision.models.utils", types.SimpleNamespace(
        load_state_dict_from_url=torch.hub.load_state_dict_from_url))
    import backbone.origin.from_origin as origin  # noqa: PLC0415 (the original's own package)
    from backbone.origin.resnet import resnet50  # noqa: PLC0415

    origin.resnet50 = lambda pretrained=False: resnet50(pretrained=False)  # no download
    from network.MINet import MINet_Res50  # noqa: PLC0415

    return MINet_Res50()


def _original_f3net(src: Path) -> nn.Module:
    sys.path.insert(0, str(src))
    import net as f3  # noqa: PLC0415

    f3.print = lambda *args, **kwargs: None  # its weight_init prints every module
    f3.ResNet.initialize = lambda self: None  # it loads ../res/resnet50-19c8e357.pth
    return f3.F3Net(types.SimpleNamespace(snapshot=None))


def _randomise_batchnorm(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)


def _transfer(original: nn.Module, ours: nn.Module, rename) -> list[str]:
    """Load the original's tensors into ours; returns our keys the original has no tensor for."""
    renamed = {rename(k): v for k, v in original.state_dict().items()}
    mine = ours.state_dict()
    unknown = sorted(set(renamed) - set(mine))
    if unknown:
        raise SystemExit(f"original tensors without a sodkit name: {unknown[:5]}")
    ours.load_state_dict(renamed, strict=False)
    return sorted(set(mine) - set(renamed))


def compare_minet(code: Path) -> dict[str, float]:
    torch.manual_seed(0)
    original = _original_minet(code)
    ours = build_network(ModelCfg(name="minet", backbone="resnet50", decoder_channels=64))
    _randomise_batchnorm(original)
    left = _transfer(original, ours, minet_key)
    assert all(k.startswith("side_heads.") for k in left), left  # sodkit's optional heads only
    x = torch.randn(2, 3, 320, 320)
    with torch.no_grad():
        a, b = original.eval()(x), ours.eval()(x)["logits"]
    return {"params_original": sum(p.numel() for p in original.parameters()),
            "params_sodkit": sum(p.numel() for p in ours.parameters()),
            "logits": (a - b).abs().max().item(), "scale": a.abs().max().item()}


def compare_f3net(src: Path) -> dict[str, float]:
    torch.manual_seed(0)
    original = _original_f3net(src)
    ours = build_network(ModelCfg(name="f3net", backbone="resnet50", decoder_channels=64,
                                  out_indices=[1, 2, 3, 4]))
    _randomise_batchnorm(original)
    assert not _transfer(original, ours, f3net_key)
    x = torch.randn(2, 3, 352, 352)
    with torch.no_grad():
        p1, p2, r2, r3, r4, r5 = original.eval()(x)
        out = ours.eval()(x)
    full = [F.interpolate(t, size=(352, 352), mode="bilinear", align_corners=False)
            for t in out["aux"]]
    diffs = {"logits (p2)": (p2 - out["logits"]).abs().max().item()}
    for name, theirs, mine in zip(["r5", "r4", "r3", "r2", "p1"], [r5, r4, r3, r2, p1], full,
                                  strict=True):
        diffs[name] = (theirs - mine).abs().max().item()
    return {"params_original": sum(p.numel() for p in original.parameters()),
            "params_sodkit": sum(p.numel() for p in ours.parameters()), **diffs,
            "scale": p2.abs().max().item()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minet", type=Path, help="lartpang/MINet's code/ folder")
    parser.add_argument("--f3net", type=Path, help="weijun88/F3Net's src/ folder")
    parser.add_argument("--atol", type=float, default=1e-5)
    args = parser.parse_args()
    worst = 0.0
    for name, path, compare in (("MINet_Res50", args.minet, compare_minet),
                                ("F3Net", args.f3net, compare_f3net)):
        if path is None:
            continue
        figures = compare(path)
        print(name, {k: (round(v, 8) if isinstance(v, float) else v) for k, v in figures.items()})
        worst = max(worst, *(v for k, v in figures.items() if k not in (
            "params_original", "params_sodkit", "scale")))
    print(f"largest output difference: {worst:.3g} (atol {args.atol:g})")
    return 0 if worst <= args.atol else 1


if __name__ == "__main__":
    sys.exit(main())
