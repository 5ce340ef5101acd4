"""ZhengPeng7/BiRefNet's released weights (``model.safetensors`` on Hugging Face, ``.pth`` files
from its training script): its state-dict names -> sodkit's ``birefnet``.

The original (``models/birefnet.py``) calls the backbone ``bb`` (its own Swin v1 and PVTv2 code,
whose names differ from timm's), the context squeeze ``squeeze_module``, and the decoder's
parts by the original's level number (``decoder_block4`` is the coarsest, ``ipt_blk5`` the
coarsest image input, ``conv_ms_spvn_4`` / ``gdt_convs_4`` its side and gradient heads);
sodkit indexes levels finest first (:mod:`sodkit.network.birefnet`). Swin's
``relative_position_index`` buffers are recomputed, not weights: they are dropped.
The two backbone families name ``norm1``.. differently (Swin: the level norms ``norm0``-
``norm3``; PVTv2: its stages' ``norm1``-``norm4``), so the rename is per family
(:func:`rename_for`). ``benchmarks/birefnet_parity.py`` loads the original's tensors into
sodkit's network this way and compares the outputs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Literal

from .formats import Release, register

Family = Literal["swin", "pvt"]
DROPPED = ("relative_position_index",)  # buffers in the original's files, no weights

_DEFORM = {"offset_conv": "offset", "modulator_conv": "modulator", "regular_conv": ""}
_BLOCK = {"conv_in": "enter.0", "bn_in": "enter.1", "conv_out": "leave.0", "bn_out": "leave.1",
          "conv_resi": "shortcut"}


def _aspp(rest: str) -> str | None:
    """ASPP / ASPPDeformable names (after ``dec_att.``) -> sodkit's :mod:`sodkit.module.aspp`."""
    if match := re.fullmatch(r"(aspp1|aspp_deforms\.(\d)|aspp([2-4]))\.(atrous_conv|bn)\.(.+)",
                             rest):
        branch = 0 if match.group(1) == "aspp1" else (
            int(match.group(2)) + 1 if match.group(2) is not None else int(match.group(3)) - 1)
        part, leaf = match.group(4), match.group(5)
        if part == "bn":
            return f"branches.{branch}.1.{leaf}"
        inner = re.fullmatch(r"(offset_conv|modulator_conv|regular_conv)\.(\w+)", leaf)
        if inner is None:  # the plain ASPP's nn.Conv2d
            return f"branches.{branch}.0.{leaf}"
        name = _DEFORM[inner.group(1)]
        return f"branches.{branch}.0.{name + '.' if name else ''}{inner.group(2)}"
    if match := re.fullmatch(r"global_avg_pool\.([12])\.(\w+)", rest):
        return f"pool.{int(match.group(1)) - 1}.{match.group(2)}"
    if match := re.fullmatch(r"(conv1|bn1)\.(\w+)", rest):
        return f"fuse.{0 if match.group(1) == 'conv1' else 1}.{match.group(2)}"
    return None


def _block(rest: str) -> str | None:
    """BasicDecBlk / ResBlk names -> :class:`~sodkit.module.birefnet_blocks.DecoderBlock`;
    a squeeze made of ASPP blocks has the ASPP's names directly."""
    if match := re.fullmatch(r"(conv_in|bn_in|conv_out|bn_out|conv_resi)\.(\w+)", rest):
        return f"{_BLOCK[match.group(1)]}.{match.group(2)}"
    if rest.startswith("dec_att."):
        inner = _aspp(rest[len("dec_att."):])
        return None if inner is None else f"context.{inner}"
    return _aspp(rest)


def _backbone(rest: str, family: Family) -> str | None:
    body = "backbone.body"
    if family == "swin":
        if match := re.fullmatch(r"layers\.(\d)\.downsample\.(.+)", rest):
            return f"{body}.layers_{int(match.group(1)) + 1}.downsample.{match.group(2)}"
        if match := re.fullmatch(r"layers\.(\d)\.(.+)", rest):
            return f"{body}.layers_{match.group(1)}.{match.group(2)}"
        if match := re.fullmatch(r"norm([0-3])\.(\w+)", rest):
            return f"backbone_norms.{match.group(1)}.{match.group(2)}"
        if rest.startswith("patch_embed."):
            return f"{body}.{rest}"
        return None
    if match := re.fullmatch(r"patch_embed1\.(.+)", rest):
        return f"{body}.patch_embed.{match.group(1)}"
    if match := re.fullmatch(r"patch_embed([2-4])\.(.+)", rest):
        return f"{body}.stages_{int(match.group(1)) - 1}.downsample.{match.group(2)}"
    if match := re.fullmatch(r"block([1-4])\.(\d+)\.(.+)", rest):
        leaf = match.group(3).replace("mlp.dwconv.dwconv.", "mlp.dwconv.")
        return f"{body}.stages_{int(match.group(1)) - 1}.blocks.{match.group(2)}.{leaf}"
    if match := re.fullmatch(r"norm([1-4])\.(\w+)", rest):
        return f"{body}.stages_{int(match.group(1)) - 1}.norm.{match.group(2)}"
    return None


def _decoder(rest: str) -> str | None:
    if match := re.fullmatch(r"decoder_block([1-4])\.(.+)", rest):
        inner = _block(match.group(2))
        return None if inner is None else f"decoders.{int(match.group(1)) - 1}.{inner}"
    if match := re.fullmatch(r"ipt_blk([1-5])\.(conv1|conv_out)\.(\w+)", rest):
        part = 0 if match.group(2) == "conv1" else 1
        return f"image_inputs.{int(match.group(1)) - 1}.{part}.{match.group(3)}"
    if match := re.fullmatch(r"lateral_block([2-4])\.conv\.(\w+)", rest):
        return f"laterals.{int(match.group(1)) - 2}.{match.group(2)}"
    if match := re.fullmatch(r"conv_out1\.0\.(\w+)", rest):
        return f"head.{match.group(1)}"
    if match := re.fullmatch(r"conv_ms_spvn_([2-4])\.(\w+)", rest):
        return f"side_heads.{int(match.group(1)) - 2}.{match.group(2)}"
    if match := re.fullmatch(r"gdt_convs_([2-4])\.([01])\.(\w+)", rest):
        return f"gradient.{int(match.group(1)) - 2}.features.{match.group(2)}.{match.group(3)}"
    if match := re.fullmatch(r"gdt_convs_(pred|attn)_([2-4])\.0\.(\w+)", rest):
        return f"gradient.{int(match.group(2)) - 2}.{match.group(1)}.{match.group(3)}"
    return None


def birefnet_key(key: str, family: Family = "swin") -> str:
    """A BiRefNet state-dict key -> sodkit's ``birefnet`` key; unknown keys unchanged (the
    import then reports them), dropped buffers -> ``""``."""
    if key.rsplit(".", 1)[-1] in DROPPED:
        return ""
    new: str | None = None
    if key.startswith("bb."):
        new = _backbone(key[3:], family)
    elif match := re.fullmatch(r"squeeze_module\.(\d+)\.(.+)", key):
        inner = _block(match.group(2))
        new = None if inner is None else f"squeeze.{match.group(1)}.{inner}"
    elif key.startswith("decoder."):
        new = _decoder(key[len("decoder."):])
    return key if new is None else new


def rename_for(family: Family) -> Callable[[str], str]:
    """The rename of one backbone family's files."""
    return functools.partial(birefnet_key, family=family)


BIREFNET = register(Release(
    name="birefnet", title="BiRefNet (ZhengPeng7/BiRefNet), Swin-L", file="model.safetensors",
    # the original's inference pipeline (cv2 resize, align_corners upsampling) is a profile of
    # its own still to come (issue 24, item 3); until then sodkit's
    recipe="general_birefnet_swinl.yaml", preprocess="sodkit", rename=rename_for("swin"),
    download="huggingface.co/ZhengPeng7/BiRefNet (model.safetensors), or the GitHub "
             "releases of github.com/ZhengPeng7/BiRefNet (BiRefNet-general-epoch_244.pth)"))
