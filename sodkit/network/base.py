"""The network registry and the one entry point the engine calls: ``build_network(cfg.model)``.

Contract of every registered network (built as ``builder(cfg: ModelCfg)``):

- ``forward(image (B, 3, H, W)) -> {"logits": (B, 1, H, W), "aux": [(B, 1, h_i, w_i), ...]}``:
  raw logits (no sigmoid), the main one at the input resolution, side outputs for deep
  supervision at their own resolutions (possibly an empty list);
- a ``.backbone`` attribute (a :class:`~sodkit.backbone.Backbone`) so the optimizer can give it
  its own learning rate;
- gradient checkpointing: ``build_network`` switches the backbone's with
  ``backbone.set_checkpointing`` and sets ``checkpoint_decoder``; the network runs its decoder
  levels through :func:`~sodkit.module.checkpoint.checkpoint_segment` when that is True;
- optionally ``set_aux_outputs(False)``: stop computing the side outputs (``"aux"`` becomes
  ``[]``) and freeze the parameters only they use. A loss that ignores side outputs
  (``loss.aux_weight: 0``) must not leave trainable parameters without gradients: DDP
  (``find_unused_parameters=False``) fails on them at the second step.
- no loss, no device, rank or precision logic inside.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from ..config.loader import ConfigError
from ..config.schema import ModelCfg
from ..registry import Registry

CHECKPOINTING = ("off", "backbone", "decoder", "all")  # model.checkpointing values

NETWORKS: Registry[Callable[[ModelCfg], nn.Module]] = Registry("network")


def build_network(cfg: ModelCfg, aux_outputs: bool = True) -> nn.Module:
    """The network named ``cfg.name``, with its backbone built (and weights loaded) from ``cfg``.

    ``aux_outputs=False``: side outputs are neither computed nor trained (their parameters stay
    in the state dict, so checkpoints load whatever ``loss.aux_weight`` was).
    """
    if cfg.name not in NETWORKS:
        raise ConfigError(f"model.name: {NETWORKS.unknown_message(cfg.name)}")
    if cfg.decoder_channels <= 0:
        raise ConfigError(f"model.decoder_channels: must be > 0, got {cfg.decoder_channels}")
    net = NETWORKS.get(cfg.name)(cfg)
    if not aux_outputs and hasattr(net, "set_aux_outputs"):
        net.set_aux_outputs(False)
    set_checkpointing(net, cfg.checkpointing)
    return net


def set_checkpointing(net: nn.Module, mode: str) -> None:
    """``model.checkpointing``: off | backbone | decoder | all."""
    if mode not in CHECKPOINTING:
        raise ConfigError(f"model.checkpointing: {mode!r} is not one of {list(CHECKPOINTING)}")
    net.backbone.set_checkpointing(mode in ("backbone", "all"))
    net.checkpoint_decoder = mode in ("decoder", "all")

