"""BiRefNet's decoder blocks (its ``models/modules/decoder_blocks.py``, ``lateral_blocks.py`` and
the decoder's ``SimpleConvs`` and gradient convolutions), on sodkit's :class:`ConvBNAct`.

- :class:`DecoderBlock`: 3x3 ConvBNReLU to 64 channels, an optional context module (ASPP or
  deformable ASPP), 3x3 ConvBN to the output width (no activation); ``residual=True`` adds a
  1x1 convolution of the input (the original's ``ResBlk``).
- :func:`image_input_block`: two 3x3 convolutions, no norm or activation between (``SimpleConvs``).
- :class:`GradientReference`: the gradient reference branch of one decoder level: a 3x3
  ConvBNReLU to 16 channels, whose 1x1 ``attn`` gates the level's map (always) and whose 1x1
  ``pred`` predicts the gradient map (training only).
"""

from __future__ import annotations

from torch import Tensor, nn

from .aspp import ASPP, ASPPDeformable
from .conv import ConvBNAct

INNER = 64  # the decoder blocks' inner width (the original's dec_channels_inter: fixed)
GRADIENT_WIDTH = 16


def context_module(kind: str, channels: int) -> nn.Module | None:
    """``dec_att``: "" (none), "ASPP" or "ASPPDeformable", on ``channels`` in and out."""
    if kind == "":
        return None
    if kind == "ASPP":
        return ASPP(channels)
    if kind == "ASPPDeformable":
        return ASPPDeformable(channels)
    raise ValueError(f"model.birefnet.dec_att: unknown context module {kind!r}")


class DecoderBlock(nn.Module):
    """``BasicDecBlk`` (or ``ResBlk`` with ``residual``)."""

    def __init__(self, in_channels: int, out_channels: int, context: str,
                 residual: bool = False) -> None:
        super().__init__()
        self.enter = ConvBNAct(in_channels, INNER, 3, bias=True)
        self.context = context_module(context, INNER)
        self.leave = ConvBNAct(INNER, out_channels, 3, act=False, bias=True)
        self.shortcut = nn.Conv2d(in_channels, out_channels, 1) if residual else None

    def forward(self, x: Tensor) -> Tensor:
        y = self.enter(x)
        if self.context is not None:
            y = self.context(y)
        y = self.leave(y)
        return y if self.shortcut is None else y + self.shortcut(x)


def squeeze_blocks(spec: str, in_channels: int, out_channels: int, context: str
                   ) -> nn.Sequential | None:
    """``squeeze_block``: "" or "<Block>_x<n>": n blocks, the first from ``in_channels`` to
    ``out_channels``; as the original, each of them is built ``(in_channels, out_channels)``,
    so n > 1 needs equal widths (the original's own constraint)."""
    if not spec:
        return None
    kind, _, count = spec.partition("_x")
    makers = {
        "BasicDecBlk": lambda: DecoderBlock(in_channels, out_channels, context),
        "ResBlk": lambda: DecoderBlock(in_channels, out_channels, context, residual=True),
        "ASPP": lambda: ASPP(in_channels, out_channels),
        "ASPPDeformable": lambda: ASPPDeformable(in_channels, out_channels),
    }
    if kind not in makers or not count.isdigit() or int(count) < 1:
        raise ValueError(f"model.birefnet.squeeze_block: unknown block {spec!r}")
    return nn.Sequential(*(makers[kind]() for _ in range(int(count))))


def image_input_block(in_channels: int, out_channels: int) -> nn.Sequential:
    """``SimpleConvs``: 3x3 conv to 64 channels, 3x3 conv to ``out_channels``."""
    return nn.Sequential(nn.Conv2d(in_channels, INNER, 3, padding=1),
                         nn.Conv2d(INNER, out_channels, 3, padding=1))


class GradientReference(nn.Module):
    """One decoder level's gradient branch: features, the attention gate, the prediction."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.features = ConvBNAct(channels, GRADIENT_WIDTH, 3, bias=True)
        self.pred = nn.Conv2d(GRADIENT_WIDTH, 1, 1)
        self.attn = nn.Conv2d(GRADIENT_WIDTH, 1, 1)

    def forward(self, x: Tensor, predict: bool) -> tuple[Tensor, Tensor | None]:
        """The gated map, and the gradient prediction's logits when ``predict``."""
        feats = self.features(x)
        gated = x * self.attn(feats).sigmoid()
        return gated, (self.pred(feats) if predict else None)
