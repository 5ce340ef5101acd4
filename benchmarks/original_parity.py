"""Load the authors' released MINet_Res50 and F3Net weights into sodkit's ``minet`` / ``f3net`` and
compare the outputs: the check that they are the published networks, not look-alikes.

    python benchmarks/original_parity.py --minet /path/to/MINet/code --f3net /path/to/F3Net/src

``--minet`` is the ``code/`` folder of a checkout of github.com/lartpang/MINet, ``--f3net`` the
``src/`` folder of github.com/weijun88/F3Net (neither is a dependency of sodkit). Both originals
are built without pretrained weights (their downloads and file loads are switched off here),
their BatchNorm statistics and affine parameters are randomised so that eval mode tests them,
every tensor of their state dict is renamed to sodkit's name and loaded (strict: nothing may be
left over on either side but MINet's optional side heads), and one batch goes through both.
Prints parameter counts and the largest output difference; exits 1 when any exceeds ``--atol``.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from sodkit.config.schema import ModelCfg
from sodkit.network import build_network

LEVEL = {32: 4, 16: 3, 8: 2, 4: 1, 2: 0}  # MINet's names by stride -> sodkit's level index
SIM_NAMES = {"h2h_0": "h_in", "h2l_0": "l_in", "h2h_1": "h_h", "h2l_1": "h_l", "l2h_1": "l_h",
             "l2l_1": "l_l", "h2h_2": "h_out", "l2h_2": "l_out", "bnh_0": "norms.0",
             "bnl_0": "norms.1", "bnh_1": "norms.2", "bnl_1": "norms.3", "bnh_2": "norms.4"}


def _minet_aim_key(level: int, name: str, leaf: str) -> str:
    """``trans.conv{level}.{name}``: conv_2nV1 (levels 0, 4) or conv_3nV1 (1-3) -> AIMLevel."""
    letters = "hml" if 1 <= level <= 3 else "hl"
    prefix = f"aim.{level}"
    if name == "identity":
        return f"{prefix}.identity.{leaf}"
    match = re.fullmatch(r"(bn)?([hml])(?:2([hml]))?_(\d)", name)
    bn, source, target, stage = match.group(1), match.group(2), match.group(3), int(match.group(4))
    if bn:
        branch = letters.index(source)
        return {0: f"{prefix}.enter.{branch}.1", 1: f"{prefix}.exchange1.norms.{branch}",
                2: f"{prefix}.exchange2.norms.{branch}", 3: f"{prefix}.out.1"}[stage] + f".{leaf}"
    if stage == 0:
        return f"{prefix}.enter.{letters.index(source)}.0.{leaf}"
    if stage == 3:
        return f"{prefix}.out.0.{leaf}"
    s, t = letters.index(source), letters.index(target)
    return f"{prefix}.exchange{stage}.convs.{s}to{t}.{leaf}"


def minet_key(key: str) -> str:
    """A ``MINet_Res50`` state-dict key -> sodkit's ``minet`` key."""
    key = re.sub(r"^div_2\.0\.", "backbone.body.conv1.", key)
    key = re.sub(r"^div_2\.1\.", "backbone.body.bn1.", key)
    key = re.sub(r"^div_4\.1\.", "backbone.body.layer1.", key)
    for source, target in (("div_8", "layer2"), ("div_16", "layer3"), ("div_32", "layer4")):
        key = re.sub(rf"^{source}\.", f"backbone.body.{target}.", key)
    if match := re.fullmatch(r"trans\.conv(\d)\.(\w+?)\.(\w+)", key):
        return _minet_aim_key(int(match.group(1)), match.group(2), match.group(3))
    if match := re.fullmatch(r"sim(\d+)\.(\w+)\.(\w+)", key):
        return f"sims.{LEVEL[int(match.group(1))]}.{SIM_NAMES[match.group(2)]}.{match.group(3)}"
    if match := re.fullmatch(r"upconv(\d+)\.basicconv\.(\d)\.(\w+)", key):
        stride, part, leaf = int(match.group(1)), match.group(2), match.group(3)
        owner = "final" if stride == 1 else f"upconvs.{LEVEL[stride]}"
        return f"{owner}.{part}.{leaf}"
    return key


def f3net_key(key: str) -> str:
    """An ``F3Net`` state-dict key -> sodkit's ``f3net`` key."""
    key = re.sub(r"^bkbone\.", "backbone.body.", key)
    if match := re.fullmatch(r"squeeze(\d)\.(\d)\.(\w+)", key):
        return f"squeeze.{int(match.group(1)) - 2}.{match.group(2)}.{match.group(3)}"
    if match := re.fullmatch(r"decoder(\d)\.cfm(\d\d)\.(conv|bn)(\d)([hv])\.(\w+)", key):
        cfm = {"45": 2, "34": 1, "23": 0}[match.group(2)]
        branch = "fine" if match.group(5) == "h" else "coarse"
        part = "0" if match.group(3) == "conv" else "1"
        return (f"decoder{match.group(1)}.{cfm}.{branch}.{int(match.group(4)) - 1}.{part}."
                f"{match.group(6)}")
    key = re.sub(r"^linearp1\.", "head1.", key)
    key = re.sub(r"^linearp2\.", "head.", key)
    if match := re.fullmatch(r"linearr(\d)\.(\w+)", key):
        return f"side_heads.{int(match.group(1)) - 2}.{match.group(2)}"
    return key


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
