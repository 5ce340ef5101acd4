"""lartpang/MINet's released ``MINet_Res50.pth``: its state-dict names -> sodkit's ``minet``.

The original (``code/network/MINet.py``) names the backbone's stages ``div_2`` .. ``div_32``, the
AIM blocks ``trans.conv0`` .. ``trans.conv4`` (conv_2nV1 / conv_3nV1, branches named by letter
``h``/``m``/``l`` and stage), the SIMs and upconvs by stride. sodkit names them by level index
(:mod:`sodkit.network.minet`); ``tests/test_import_weights.py`` checks every key the original
has against sodkit's network, and ``benchmarks/original_parity.py`` loads them into it and
compares the outputs with the original's.
"""

from __future__ import annotations

import re

from .formats import Release, register

LEVEL = {32: 4, 16: 3, 8: 2, 4: 1, 2: 0}  # MINet's names by stride -> sodkit's level index
SIM_NAMES = {"h2h_0": "h_in", "h2l_0": "l_in", "h2h_1": "h_h", "h2l_1": "h_l", "l2h_1": "l_h",
             "l2l_1": "l_l", "h2h_2": "h_out", "l2h_2": "l_out", "bnh_0": "norms.0",
             "bnl_0": "norms.1", "bnh_1": "norms.2", "bnl_1": "norms.3", "bnh_2": "norms.4"}
_AIM_PART = re.compile(r"(bn)?([hml])(?:2([hml]))?_(\d)")


def _aim_key(level: int, name: str, leaf: str) -> str:
    """``trans.conv{level}.{name}``: conv_2nV1 (levels 0, 4) or conv_3nV1 (1-3) -> AIMLevel."""
    letters = "hml" if 1 <= level <= 3 else "hl"
    prefix = f"aim.{level}"
    if name == "identity":
        return f"{prefix}.identity.{leaf}"
    match = _AIM_PART.fullmatch(name)
    if match is None or any(c not in letters for c in match.group(2) + (match.group(3) or "")):
        return f"trans.conv{level}.{name}.{leaf}"  # not MINet's: reported as unexpected
    bn, source, target, stage = match.group(1), match.group(2), match.group(3), int(match.group(4))
    if bn:
        branch = letters.index(source)
        outs = {0: f"{prefix}.enter.{branch}.1", 1: f"{prefix}.exchange1.norms.{branch}",
                2: f"{prefix}.exchange2.norms.{branch}", 3: f"{prefix}.out.1"}
        return f"{outs[stage]}.{leaf}" if stage in outs else f"trans.conv{level}.{name}.{leaf}"
    if stage == 0:
        return f"{prefix}.enter.{letters.index(source)}.0.{leaf}"
    if stage == 3:
        return f"{prefix}.out.0.{leaf}"
    if target is None:
        return f"trans.conv{level}.{name}.{leaf}"
    s, t = letters.index(source), letters.index(target)
    return f"{prefix}.exchange{stage}.convs.{s}to{t}.{leaf}"


def minet_key(key: str) -> str:
    """A ``MINet_Res50`` state-dict key -> sodkit's ``minet`` key (unknown keys unchanged)."""
    key = re.sub(r"^div_2\.0\.", "backbone.body.conv1.", key)
    key = re.sub(r"^div_2\.1\.", "backbone.body.bn1.", key)
    key = re.sub(r"^div_4\.1\.", "backbone.body.layer1.", key)
    for source, target in (("div_8", "layer2"), ("div_16", "layer3"), ("div_32", "layer4")):
        key = re.sub(rf"^{source}\.", f"backbone.body.{target}.", key)
    if match := re.fullmatch(r"trans\.conv(\d)\.(\w+?)\.(\w+)", key):
        return _aim_key(int(match.group(1)), match.group(2), match.group(3))
    if (match := re.fullmatch(r"sim(\d+)\.(\w+)\.(\w+)", key)) and \
            int(match.group(1)) in LEVEL and match.group(2) in SIM_NAMES:
        return f"sims.{LEVEL[int(match.group(1))]}.{SIM_NAMES[match.group(2)]}.{match.group(3)}"
    if (match := re.fullmatch(r"upconv(\d+)\.basicconv\.(\d)\.(\w+)", key)) and \
            (int(match.group(1)) in LEVEL or match.group(1) == "1"):
        stride, part, leaf = int(match.group(1)), match.group(2), match.group(3)
        owner = "final" if stride == 1 else f"upconvs.{LEVEL[stride]}"
        return f"{owner}.{part}.{leaf}"
    return key


MINET_R50 = register(Release(
    name="minet-r50", title="MINet_Res50 (lartpang/MINet)", file="MINet_Res50.pth",
    recipe="duts_minet_r50.yaml", preprocess="minet", rename=minet_key,
    download="github.com/lartpang/MINet, README 'Results & Pretrained Parameters' (Google Drive "
             "folder 16yTcf_m-ehnhWgXlN6hbZpBKMy6lYIQQ, or Baidu Pan 1KkmkcodAVxJT8NRA63nBag, "
             "code tl7k): MINet_Res50.pth",
    fresh=("side_heads.",)))
