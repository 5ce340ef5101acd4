"""weijun88/F3Net's released ``model-32``: its state-dict names -> sodkit's ``f3net``.

The original (``src/net.py``) calls the backbone ``bkbone``, the squeezes ``squeeze2`` ..
``squeeze5`` (by stride level), the CFMs ``cfm23`` / ``cfm34`` / ``cfm45`` with ``h``
(fine) and ``v`` (coarse) branches, the heads ``linearp1`` / ``linearp2`` / ``linearr2`` ..
``linearr5``. The release was trained with apex O2, so it most likely holds float16 tensors
beside float32 BatchNorms: :mod:`sodkit.published.convert` loads every one as float32.
"""

from __future__ import annotations

import re

from .formats import Release, register

_CFM = {"45": 2, "34": 1, "23": 0}


def f3net_key(key: str) -> str:
    """An ``F3Net`` state-dict key -> sodkit's ``f3net`` key (unknown keys unchanged)."""
    key = re.sub(r"^bkbone\.", "backbone.body.", key)
    if match := re.fullmatch(r"squeeze([2-5])\.(\d)\.(\w+)", key):
        return f"squeeze.{int(match.group(1)) - 2}.{match.group(2)}.{match.group(3)}"
    if match := re.fullmatch(r"decoder([12])\.cfm(45|34|23)\.(conv|bn)([1-4])([hv])\.(\w+)", key):
        cfm = _CFM[match.group(2)]
        branch = "fine" if match.group(5) == "h" else "coarse"
        part = "0" if match.group(3) == "conv" else "1"
        return (f"decoder{match.group(1)}.{cfm}.{branch}.{int(match.group(4)) - 1}.{part}."
                f"{match.group(6)}")
    key = re.sub(r"^linearp1\.", "head1.", key)
    key = re.sub(r"^linearp2\.", "head.", key)
    if match := re.fullmatch(r"linearr([2-5])\.(\w+)", key):
        return f"side_heads.{int(match.group(1)) - 2}.{match.group(2)}"
    return key


F3NET_R50 = register(Release(
    name="f3net-r50", title="F3Net (weijun88/F3Net)", file="model-32",
    recipe="duts_f3net_r50.yaml", preprocess="f3net", rename=f3net_key,
    download="github.com/weijun88/F3Net, README 'Download model' (Google Drive file "
             "1jcsmxZHL6DGwDplLp93H4VeN2ZjqBsOF, or Baidu Pan 1qlqiCG0d9o2wH8ddeVJsSQ): "
             "model-32, saved as src/out/model-32"))
