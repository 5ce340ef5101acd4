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

The released files come with every backbone the original offers (Swin v1 T/S/B/L, PVTv2
b0-b5): :func:`recognise` reads which one from the tensors' shapes (Swin: the embedding width,
the blocks per stage, the heads of each stage's relative-position table and its window;
PVTv2: the stage widths, the blocks per stage and the MLP width), and the model file's config
gets the matching timm backbone (sodkit's decoder takes its channels from it, as the
original's ``lateral_channels_in_collection``). A file that fits none is refused with what
was found.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import UserError
from .formats import Release, Variant, register

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


@dataclass(frozen=True)
class Shape:
    """One backbone of the original (``models/backbones/swin_v1.py``, ``pvt_v2.py``) by what its
    tensors show; ``heads`` and ``window`` are Swin's (PVTv2's heads leave no trace in shapes),
    ``mlp`` PVTv2's MLP width over the stage width."""

    name: str  # the original's config.py name
    timm: str  # sodkit's model.backbone
    widths: tuple[int, ...]
    depths: tuple[int, ...]
    heads: tuple[int, ...] = ()
    window: int = 0
    mlp: int = 0

    @property
    def family(self) -> Family:
        return "swin" if self.name.startswith("swin") else "pvt"

    def describe(self) -> str:
        if self.family == "swin":
            return (f"Swin, embed dim {self.widths[0]}, depths {list(self.depths)}, heads "
                    f"{list(self.heads)}, window {self.window}")
        return (f"PVTv2, stage widths {list(self.widths)}, depths {list(self.depths)}, MLP ratio "
                f"{self.mlp}")


def _swin(name: str, timm: str, embed: int, depths: tuple[int, ...], heads: tuple[int, ...],
          window: int) -> Shape:
    return Shape(name, timm, (embed,), depths, heads, window)


_PVT_WIDTHS = (64, 128, 320, 512)
BACKBONES: dict[str, Shape] = {s.name: s for s in (
    _swin("swin_v1_t", "swin_tiny_patch4_window7_224", 96, (2, 2, 6, 2), (3, 6, 12, 24), 7),
    _swin("swin_v1_s", "swin_small_patch4_window7_224", 96, (2, 2, 18, 2), (3, 6, 12, 24), 7),
    _swin("swin_v1_b", "swin_base_patch4_window12_384", 128, (2, 2, 18, 2), (4, 8, 16, 32), 12),
    _swin("swin_v1_l", "swin_large_patch4_window12_384", 192, (2, 2, 18, 2), (6, 12, 24, 48),
          12),
    Shape("pvt_v2_b0", "pvt_v2_b0", (32, 64, 160, 256), (2, 2, 2, 2), mlp=8),
    Shape("pvt_v2_b1", "pvt_v2_b1", _PVT_WIDTHS, (2, 2, 2, 2), mlp=8),
    Shape("pvt_v2_b2", "pvt_v2_b2", _PVT_WIDTHS, (3, 4, 6, 3), mlp=8),
    Shape("pvt_v2_b3", "pvt_v2_b3", _PVT_WIDTHS, (3, 4, 18, 3), mlp=8),
    Shape("pvt_v2_b4", "pvt_v2_b4", _PVT_WIDTHS, (3, 8, 27, 3), mlp=8),
    Shape("pvt_v2_b5", "pvt_v2_b5", _PVT_WIDTHS, (3, 6, 40, 3), mlp=4),
)}
TIMM = {name: shape.timm for name, shape in BACKBONES.items()}  # the original's name -> timm's


def _blocks(keys: list[str], pattern: str) -> tuple[int, ...]:
    """Blocks per stage: the distinct block indices under each stage (``pattern`` has the stage
    and block index as groups)."""
    found: dict[int, set[int]] = {}
    for key in keys:
        if match := re.match(pattern, key):
            found.setdefault(int(match.group(1)), set()).add(int(match.group(2)))
    return tuple(len(found[i]) for i in sorted(found))


def _found(weights: Mapping[str, Any]) -> Shape | None:
    """What the backbone tensors of a file say, as a :class:`Shape` named by its family; None when
    the file has neither Swin's nor PVTv2's patch embedding."""
    keys = list(weights)
    # every shape padded to two sides, so that a tensor of the wrong rank misses, not fails
    dims = {k: (*tuple(v.shape), 0, 0) for k, v in weights.items() if k.startswith("bb.")}
    if "bb.patch_embed.proj.weight" in dims:  # Swin v1
        depths = _blocks(keys, r"bb\.layers\.(\d+)\.blocks\.(\d+)\.")
        tables = [dims.get(f"bb.layers.{i}.blocks.0.attn.relative_position_bias_table")
                  for i in range(len(depths))]
        heads = tuple(t[1] for t in tables if t)
        side = math.isqrt(tables[0][0]) if tables and tables[0] else 0
        return _swin("swin", "", dims["bb.patch_embed.proj.weight"][0], depths, heads,
                     (side + 1) // 2)
    if "bb.patch_embed1.proj.weight" in dims:  # PVTv2
        widths = tuple(dims[f"bb.patch_embed{i}.proj.weight"][0] for i in range(1, 5)
                       if f"bb.patch_embed{i}.proj.weight" in dims)
        fc1 = dims.get("bb.block1.0.mlp.fc1.weight")
        mlp = fc1[0] // widths[0] if fc1 and widths and widths[0] else 0
        return Shape("pvt", "", widths, _blocks(keys, r"bb\.block(\d)\.(\d+)\."), mlp=mlp)
    return None


def recognise(weights: Mapping[str, Any], source: Path | str = "the file") -> Shape:
    """The original's backbone whose shapes ``weights`` (the original's names) has; a
    :class:`~sodkit.errors.UserError` saying what was found when none fits."""
    found = _found(weights)
    if found is None:
        raise UserError(f"{source} is not a BiRefNet file sodkit knows: it has no backbone "
                        f"patch embedding (bb.patch_embed.proj.weight for Swin v1, "
                        f"bb.patch_embed1.proj.weight for PVTv2; {len(weights)} tensors, "
                        f"e.g. {', '.join(list(weights)[:2])}; its VGG, ResNet and DINOv3 "
                        f"backbones are not supported). Nothing was written")
    fields = ("widths", "depths", "heads", "window", "mlp")
    for shape in BACKBONES.values():
        if all(getattr(shape, f) == getattr(found, f) for f in fields):
            return shape
    family = "swin_v1_t/s/b/l" if found.family == "swin" else "pvt_v2_b0..b5"
    raise UserError(f"{source}: its backbone fits none of the original's {family} "
                    f"(found: {found.describe()}). Nothing was written")


def variant(weights: Mapping[str, Any], source: Path) -> Variant:
    """The released file's backbone: its timm name in the model file's config, its rename."""
    shape = recognise(weights, source)
    return Variant(title=f"BiRefNet (ZhengPeng7/BiRefNet), {shape.name}",
                   model={"backbone": shape.timm}, rename=rename_for(shape.family))


BIREFNET = register(Release(
    name="birefnet", title="BiRefNet (ZhengPeng7/BiRefNet)", file="model.safetensors",
    recipe="general_birefnet_swinl.yaml", preprocess="birefnet", rename=rename_for("swin"),
    variant=variant,
    download="huggingface.co/ZhengPeng7/BiRefNet (model.safetensors), or the GitHub "
             "releases of github.com/ZhengPeng7/BiRefNet (BiRefNet-general-epoch_244.pth)"))
