"""``birefnet``: BiRefNet (Zheng et al., "Bilateral Reference for High-Resolution Dichotomous
Image Segmentation", CAAI AIR 2024), as the authors' code builds it (github.com/ZhengPeng7/
BiRefNet, ``models/birefnet.py``); ``model.birefnet`` holds its options (the defaults: the
released general model's). Levels are the backbone's four maps, strides 4-32, finest first
(other level counts work too: ``cxt_num`` is then at most the number of finer levels).

1. Encoder: the backbone's maps (Swin: each normalised by its own LayerNorm, ``backbone_norms``,
   and windows padded before the shift, as the original's Swin;
   :mod:`sodkit.backbone.swin_windows`). ``mul_scl_ipt: cat`` runs the backbone again on the
   image at half size and concatenates each map with its upsampled half-size twin (``add``:
   adds them). ``cxt_num`` finer maps, resized to the coarsest level, are concatenated to it,
   and the ``squeeze`` block brings it back to its width.
2. Decoder, coarsest level first: the coarser level's map upsampled, plus a 1x1 lateral of the
   level's encoder map; with ``dec_ipt`` the image cut in stride x stride patches stacked on the
   channels (``dec_ipt_split``; else the resized image) through two 3x3 convs is concatenated;
   then a :class:`~sodkit.module.birefnet_blocks.DecoderBlock` (deformable ASPP inside). With
   ``out_ref`` each of the three coarser levels' maps is gated by its gradient reference branch.
3. The finest decoded map is upsampled to the image size, joined with the image's own input
   block, and a 1x1 conv gives the logits. Every resize is bilinear with aligned corners.

Outputs: ``logits``; with side outputs on, ``aux``: the three coarser levels' logits
(``ms_supervision``; the original computes them in training only), coarse to fine; with
``out_ref``, in training, and
:meth:`BiRefNet.set_gradient_outputs` (for a loss that supervises them), ``gradient`` (each
level's gradient logits, at its own size, coarse to fine) and ``gradient_target`` (the image's
5x5 Laplacian times that level's upsampled side logits, at the image size: the original's
``gdt_label``, not detached). The original takes sides that are multiples of 32 (its patches
tile every level); other sides work here (:func:`image_patches`).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..backbone import Backbone
from ..backbone.levels import STRIDES_4_TO_32
from ..backbone.swin_windows import is_swin, pad_windows_first
from ..config.schema import BiRefNetCfg, ModelCfg
from ..errors import ConfigError
from ..module.birefnet_blocks import (
    DecoderBlock,
    GradientReference,
    image_input_block,
    squeeze_blocks,
)
from .base import NETWORKS, SODNetwork


def resize_aligned(x: Tensor, size: torch.Size | tuple[int, int]) -> Tensor:
    """Bilinear resize with ``align_corners=True``, as every resize of the original."""
    if tracing():  # sizes stay symbolic in an export: always resized (the identity if equal)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=True)
    if tuple(x.shape[-2:]) == tuple(size):
        return x  # the aligned-corner resize to the same size is the identity
    return F.interpolate(x, size=tuple(size), mode="bilinear", align_corners=True)


def tracing() -> bool:
    """Inside an ONNX export (or a trace): a Python decision on a size or ``int()`` of one
    would freeze the export size into the graph."""
    return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()


def image_patches(image: Tensor, size: torch.Size | tuple[int, int], grid: int) -> Tensor:
    """(B, C, H, W) -> (B, C * grid^2, h, w): the image cut in a grid x grid of patches of
    ``size`` = (h, w), stacked on the channels, channel-major (the original's
    ``image2patches``, whose grid is H // h: the level's stride). Where the patches do not
    tile the image (sides that are not multiples of 32), the image is first resized to
    grid * h x grid * w; the original takes only tiling sizes, for which nothing is resized."""
    b, c = image.shape[:2]
    h, w = (size[0], size[1]) if tracing() else (int(size[0]), int(size[1]))
    image = resize_aligned(image, (grid * h, grid * w))
    patches = image.reshape(b, c, grid, h, grid, w).permute(0, 1, 2, 4, 3, 5)
    return patches.reshape(b, c * grid * grid, h, w)


def laplacian5(image: Tensor) -> Tensor:
    """The original's gradient reference: the 5x5 Laplacian (all ones, -24 at the centre,
    divided by 48) of the channel mean, reflect padding (kornia's ``laplacian(x, 5)``)."""
    gray = image.mean(dim=1, keepdim=True)
    kernel = torch.ones(1, 1, 5, 5, dtype=gray.dtype, device=gray.device)
    kernel[..., 2, 2] = -24.0
    return F.conv2d(F.pad(gray, (2, 2, 2, 2), mode="reflect"), kernel / 48.0)


@NETWORKS.register("birefnet")
class BiRefNet(SODNetwork):
    """Backbone (twice, with ``mul_scl_ipt``) + context squeeze + bilateral-reference decoder."""

    STRIDES = STRIDES_4_TO_32

    def __init__(self, cfg: ModelCfg) -> None:
        super().__init__()
        opts = cfg.birefnet
        _check(opts)
        self.opts = opts
        swin = is_swin(cfg.backbone)
        if swin:  # keep every stage's window and shift whatever the map size (the original's)
            cfg = dataclasses.replace(
                cfg, backbone_kwargs={"always_partition": True, **cfg.backbone_kwargs})
        self.backbone = Backbone.from_cfg(cfg, self.STRIDES)
        if len(self.backbone.channels) < 2:
            raise ConfigError(f"model.backbone: birefnet takes at least 2 levels (the original: "
                              f"4, strides 4-32), {cfg.backbone} gives {self.backbone.channels}")
        self.backbone_norms = None
        if swin:
            pad_windows_first(self.backbone.body)
            self.backbone_norms = nn.ModuleList(nn.LayerNorm(c) for c in self.backbone.channels)
        chans = [c * (2 if opts.mul_scl_ipt == "cat" else 1) for c in self.backbone.channels]
        self._grids = [1, *self.backbone.strides]  # patches per side of each image input
        self._build_decoder(chans, opts)
        if opts.batchnorm is False:  # "auto" is resolved with data.batch_size when read
            drop_decoder_batchnorm(self)
        self.gradient_outputs = False
        self.set_gradient_outputs(False)

    def _build_decoder(self, chans: list[int], opts: BiRefNetCfg) -> None:
        context = opts.dec_att
        top = len(chans) - 1  # the coarsest level (3 in the original)
        self.cxt = min(opts.cxt_num, top)  # finer levels joined to it
        top_in = chans[top] + sum(chans[top - self.cxt:top])
        self.squeeze = squeeze_blocks(opts.squeeze_block, top_in, chans[top], context)
        if self.squeeze is None and top_in != chans[top]:
            raise ConfigError("model.birefnet: cxt_num > 0 needs a squeeze_block")
        # image inputs at full size (0) and at each level (1-4): 3 * stride^2 channels split
        image_out = [chans[0] // 8] + [chans[min(i + 1, top)] // 8 for i in range(len(chans))]
        self.image_inputs = None
        if opts.dec_ipt:
            self.image_inputs = nn.ModuleList(
                image_input_block(3 * g * g if opts.dec_ipt_split else 3, out)
                for g, out in zip(self._grids, image_out, strict=True))
        extra = image_out if opts.dec_ipt else [0] * (len(chans) + 1)
        outs = [chans[0] // 2, *chans[:top]]  # decoder level i's width: the finer level's
        self.decoders = nn.ModuleList(
            DecoderBlock(chans[i] + extra[i + 1], outs[i], context,
                         residual=opts.dec_blk == "ResBlk") for i in range(len(chans)))
        self.laterals = nn.ModuleList(nn.Conv2d(chans[i], outs[i + 1], 1) for i in range(top))
        self.head = nn.Conv2d(outs[0] + extra[0], 1, 1)
        self.side_heads = nn.ModuleList(nn.Conv2d(outs[i], 1, 1) for i in range(1, top + 1)) \
            if opts.ms_supervision else nn.ModuleList()
        self.gradient = nn.ModuleList(GradientReference(outs[i]) for i in range(1, top + 1)) \
            if opts.out_ref else nn.ModuleList()

    def aux_modules(self) -> list[nn.Module]:
        return [self.side_heads]

    def set_gradient_outputs(self, enabled: bool) -> None:
        """Compute (and train) the gradient predictions and their targets in training mode,
        for a loss that supervises them; off by default: their 1x1 ``pred`` convs are then
        frozen, so that every trainable parameter gets a gradient (DDP)."""
        self.gradient_outputs = enabled and bool(self.gradient)
        for branch in self.gradient:
            branch.pred.requires_grad_(self.gradient_outputs)

    @property
    def side_outputs(self) -> int:
        return len(self.side_heads)

    def _maps(self, image: Tensor) -> list[Tensor]:
        feats = self.backbone(image)
        if self.backbone_norms is not None:
            feats = [norm(f.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
                     for norm, f in zip(self.backbone_norms, feats, strict=True)]
        return feats

    def _encode(self, image: Tensor) -> list[Tensor]:
        feats = self._maps(image)
        mode = self.opts.mul_scl_ipt
        if mode:
            height, width = image.shape[-2:]
            half = self._maps(resize_aligned(image, (height // 2, width // 2)))
            twins = [resize_aligned(h, f.shape[-2:]) for f, h in zip(feats, half, strict=True)]
            feats = [torch.cat([f, t], dim=1) if mode == "cat" else f + t
                     for f, t in zip(feats, twins, strict=True)]
        if self.cxt:
            coarsest = feats[-1]
            finer = [resize_aligned(f, coarsest.shape[-2:]) for f in feats[-1 - self.cxt:-1]]
            feats[-1] = torch.cat([*finer, coarsest], dim=1)
        if self.squeeze is not None:
            feats[-1] = self._run(self.squeeze, feats[-1])
        return feats

    def _with_image(self, x: Tensor, image: Tensor, index: int) -> Tensor:
        """``x`` joined with image input ``index`` (0: full size, 1-4: the levels)."""
        if self.image_inputs is None:
            return x
        source = image_patches(image, x.shape[-2:], self._grids[index]) \
            if self.opts.dec_ipt_split else image
        return torch.cat([x, self.image_inputs[index](resize_aligned(source, x.shape[-2:]))], 1)

    def _level(self, i: int, x: Tensor, p: Tensor | None, image: Tensor, sides: bool,
               predict: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Decoder level ``i`` on its encoder map ``x`` and the coarser level's map ``p``: its
        map, side logits (``sides``) and gradient logits (``predict``)."""
        if p is not None:
            x = resize_aligned(p, x.shape[-2:]) + self.laterals[i](x)
        p = self.decoders[i](self._with_image(x, image, i + 1))
        side = grad = None
        if i > 0 and self.side_heads and sides:
            side = self.side_heads[i - 1](p)
        if i > 0 and self.gradient:
            p, grad = self.gradient[i - 1](p, predict)
        return p, side, grad

    def forward(self, image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        feats = self._encode(image)
        predict = self.training and self.gradient_outputs
        sides = self.aux_outputs or predict  # the gradient targets need the side logits
        aux: list[Tensor] = []
        grads: list[Tensor] = []
        p: Tensor | None = None
        for i in reversed(range(len(feats))):
            p, side, grad = self._run(self._level, i, feats[i], p, image, sides, predict)
            aux += [side] if side is not None else []
            grads += [grad] if grad is not None else []
        out: dict[str, Tensor | list[Tensor]] = {
            "logits": self._run(self._output, p, image), "aux": aux if self.aux_outputs else []}
        if grads and self.gradient_outputs:
            out["gradient"] = grads
            out["gradient_target"] = self._run(self._gradient_targets, image, *aux)
        return out

    def _output(self, p: Tensor, image: Tensor) -> Tensor:
        """The logits: the finest decoded map at the image size with the image's own input
        (the largest maps of the network: one checkpoint segment with the decoder's)."""
        return self.head(self._with_image(resize_aligned(p, image.shape[-2:]), image, 0))

    def _gradient_targets(self, image: Tensor, *sides: Tensor) -> list[Tensor]:
        """The original's ``gdt_label``: the image's Laplacian times each side output."""
        reference = laplacian5(image)
        return [reference * resize_aligned(s, reference.shape[-2:]) for s in sides]


def _check(opts: BiRefNetCfg) -> None:
    if opts.out_ref and not opts.ms_supervision:
        raise ConfigError("model.birefnet.out_ref needs ms_supervision: true (its gradient "
                          "targets are the side outputs times the image's Laplacian)")


def drop_decoder_batchnorm(net: nn.Module) -> None:
    """Every BatchNorm outside the backbone becomes an identity, as the original builds its
    decoder, ASPP and gradient branch for a per-GPU batch of 1 (batch statistics of one image's
    1x1 pooled map cannot be taken)."""
    for name, module in list(net.named_modules()):
        if name.startswith("backbone"):
            continue
        for child_name, child in module.named_children():
            if isinstance(child, nn.BatchNorm2d):
                setattr(module, child_name, nn.Identity())
