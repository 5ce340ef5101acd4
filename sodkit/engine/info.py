"""What ``sodkit info`` reports about a config's network: parameters, FLOPs, feature maps.

FLOPs are counted by ``torch.utils.flop_counter.FlopCounterMode`` on one forward pass of one
image at the configured input size (a multiply-add counts 2, as in the papers' "FLOPs" that
are 2 x MACs; ops without a FLOP formula, such as interpolation and activations, count 0),
with formulas for the ops it misses: deformable convolution and attention on the CPU
(:mod:`sodkit.engine.flops`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from ..config import Config

logger = logging.getLogger(__name__)


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Total / trainable parameters, and how many of them are in ``model.backbone``."""
    params = list(model.parameters())
    backbone = getattr(model, "backbone", None)
    in_backbone = sum(p.numel() for p in backbone.parameters()) if backbone is not None else 0
    total = sum(p.numel() for p in params)
    return {"total": total, "trainable": sum(p.numel() for p in params if p.requires_grad),
            "backbone": in_backbone, "rest": total - in_backbone}


def forward_flops(model: nn.Module, size: int, channels: int = 3) -> int:
    """FLOPs of one forward pass of one ``size`` x ``size`` image (eval mode, no autograd), on
    the device of the model's parameters (on ``meta`` no arithmetic runs: shapes only)."""
    from .flops import flops_by_op

    device = next(model.parameters(), torch.empty(0)).device
    image = torch.zeros(1, channels, size, size, device=device)
    return sum(flops_by_op(model, image).values())


def _counted_flops(meta_model: nn.Module, build: Callable[[], nn.Module], size: int) -> int:
    """FLOPs counted on the meta device (a BiRefNet Swin-L at 1024 px: a second, not minutes
    and gigabytes); on the CPU (``build()``) where a network's forward needs real values."""
    try:
        return forward_flops(meta_model, size)
    except (RuntimeError, NotImplementedError):
        from ..progress import Progress

        logger.info("info: this network's forward needs real values: counting its FLOPs on "
                    "the CPU at %dx%d (a forward pass; minutes for a large network)", size, size)
        with Progress(2, "info: FLOPs", unit="stage", summary=True) as progress:
            model = build()
            progress.update(postfix="network built")
            flops = forward_flops(model, size)
            progress.update(postfix="forward pass counted")
        return flops


def describe(cfg: Config) -> dict[str, Any]:
    """Everything ``sodkit info`` prints, as plain values."""
    from ..data import PRESETS
    from ..loss import LOSSES
    from ..network import NETWORKS, build_network

    # counts need no weights; side outputs count only when the loss trains them (as in training)
    def build() -> nn.Module:
        return build_network(replace(cfg.model, pretrained=None), aux_outputs=cfg.loss.uses_aux)

    with torch.device("meta"):  # shapes are all the counts need
        model = build()
    backbone = getattr(model, "backbone", None)
    return {
        "network": cfg.model.name, "backbone": cfg.model.backbone, "size": cfg.data.size,
        "parameters": parameter_counts(model),
        "flops": _counted_flops(model, build, cfg.data.size),
        "strides": list(getattr(backbone, "strides", [])),
        "channels": list(getattr(backbone, "channels", [])),
        "checkpointing": cfg.model.checkpointing,
        "registered": {"networks": NETWORKS.names(), "losses": LOSSES.names(),
                       "presets": PRESETS.names()},
    }


def _human(value: float, unit: str) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if value >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def format_description(info: dict[str, Any]) -> str:
    p = info["parameters"]
    reg = info["registered"]
    source = info.get("source")
    head = [f"source       {source['kind']} {source['file']}: "
            + ", ".join(f"{k} {v}" for k, v in source.items() if k not in ("kind", "file"))
            ] if source else []
    return "\n".join([
        *head,
        f"network      {info['network']} on {info['backbone']} "
        f"(checkpointing {info['checkpointing']})",
        f"parameters   total {p['total']} ({_human(p['total'], '')}), trainable {p['trainable']}; "
        f"backbone {p['backbone']}, rest {p['rest']}",
        f"FLOPs        {info['flops']} ({_human(info['flops'], 'FLOPs')}) per image at "
        f"{info['size']}x{info['size']}, forward",
        f"features     strides {info['strides']}, channels {info['channels']}",
        f"networks     {', '.join(reg['networks'])}",
        f"losses       {', '.join(reg['losses'])}",
        f"presets      {', '.join(reg['presets'])}",
    ])
