"""The network registry and the one entry point the engine calls: ``build_network(cfg.model)``.

Contract of every registered network (built as ``builder(cfg: ModelCfg)``):

- ``forward(image (B, 3, H, W)) -> {"logits": (B, 1, H, W), "aux": [(B, 1, h_i, w_i), ...]}``:
  raw logits (no sigmoid), the main one at the input resolution, side outputs for deep
  supervision at their own resolutions (possibly an empty list); optionally
  ``"coarse_logits"``: the main logits before a final upsampling to the input size (F3Net's
  stride-4 head), which the ``f3net`` inference pipeline resizes straight to the image's size;
- a ``.backbone`` attribute (a :class:`~sodkit.backbone.Backbone`) so the optimizer can give it
  its own learning rate, built with ``Backbone.from_cfg(cfg, self.STRIDES)``: ``STRIDES`` (a
  :class:`~sodkit.backbone.levels.StrideNeed`) declares the strides the decoder takes, which
  ``model.out_indices: auto`` picks from any timm family;
- gradient checkpointing: ``build_network`` switches the backbone's with
  ``backbone.set_checkpointing`` and sets ``checkpoint_decoder``; the network runs its decoder
  levels through :func:`~sodkit.module.grad_checkpoint.checkpoint_segment` when that is True;
- optionally ``side_outputs`` (:class:`SODNetwork` provides it): how many side outputs there
  are, so that ``loss.aux_weights`` is checked against it before training;
- optionally ``set_aux_outputs(False)`` (:class:`SODNetwork` provides it): stop computing the
  side outputs (``"aux"`` becomes ``[]``) and freeze the parameters only they use. A loss that
  ignores side outputs (``loss.aux_weight: 0``) must not leave trainable parameters without
  gradients: DDP (``find_unused_parameters=False``) fails on them at the second step.
- no loss, no device, rank or precision logic inside.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from torch import Tensor, nn

from ..backbone.stem import STEM
from ..config.ranges import check_ranges
from ..config.schema import ModelCfg
from ..errors import ConfigError
from ..module import checkpoint_segment, resize_to
from ..registry import Registry

CHECKPOINTING = ("off", "backbone", "decoder", "all")  # model.checkpointing values

NETWORKS: Registry[Callable[[ModelCfg], nn.Module]] = Registry("network")


def build_network(cfg: ModelCfg, aux_outputs: bool = True, initialise: bool = True
                  ) -> nn.Module:
    """The network named ``cfg.name``, with its backbone built (and weights loaded) from ``cfg``.

    ``aux_outputs=False``: side outputs are neither computed nor trained (their parameters stay
    in the state dict, so checkpoints load whatever ``loss.aux_weight`` was).
    ``initialise=False``: parameters are left unset (:mod:`sodkit.module.no_init`), for a
    network whose every weight is loaded next, strictly, from a file (predict, test, the API).
    """
    if cfg.name not in NETWORKS:
        raise ConfigError(f"model.name: {NETWORKS.unknown_message(cfg.name)}")
    check_ranges(cfg, "model.", ConfigError)  # a ModelCfg built in code, not loaded
    from .size import check_network_size

    check_network_size(cfg, NETWORKS.get(cfg.name))  # before it allocates anything
    if initialise:
        net = NETWORKS.get(cfg.name)(cfg)
    else:
        from ..module.no_init import skip_parameter_init

        with skip_parameter_init():
            net = NETWORKS.get(cfg.name)(cfg)
    if not aux_outputs and hasattr(net, "set_aux_outputs"):
        net.set_aux_outputs(False)
    freeze_parameters(net, cfg.freeze)
    set_checkpointing(net, cfg.checkpointing)
    return net


def freeze_parameters(net: nn.Module, prefixes: list[str]) -> None:
    """``model.freeze``: parameters whose dotted name is or starts with a prefix stop training
    (left out of the optimizer; BatchNorm buffers still update in training mode, as they do when
    the original code leaves parameters out of its optimizer), except when the whole encoder
    (``backbone.body``) is frozen: it then stays in eval mode, norm layers included. A prefix
    that matches nothing is a config error naming the closest module, before any training."""
    named = dict(net.named_parameters())
    for prefix in prefixes:
        if prefix == STEM:  # the family's stem, as timm names it (sodkit/backbone/stem.py)
            hits = list(net.backbone.stem_parameters().values())
            if not hits:
                raise ConfigError(f"model.freeze: {prefix!r}: timm names no stem for "
                                  f"{_network_name(net)}; name its parameters instead")
        else:
            hits = [p for name, p in named.items()
                    if name == prefix or name.startswith(prefix + ".")]
        if not hits:
            modules = [name for name, _ in net.named_modules() if name]
            close = difflib.get_close_matches(prefix, modules + list(named), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"model.freeze: {prefix!r} matches no parameter of "
                              f"{_network_name(net)}{hint}")
        for param in hits:
            param.requires_grad_(False)
    body = getattr(getattr(net, "backbone", None), "body", None)
    if body is not None and prefixes and not any(p.requires_grad for p in body.parameters()):
        net.backbone.frozen = True  # the whole encoder: its norm layers stay in eval mode


def _network_name(net: nn.Module) -> str:
    """How an error names the network: its class and backbone."""
    backbone = getattr(getattr(net, "backbone", None), "name", None)
    return f"{type(net).__name__} ({backbone})" if backbone else type(net).__name__


def set_checkpointing(net: nn.Module, mode: str) -> None:
    """``model.checkpointing``: off | backbone | decoder | all."""
    if mode not in CHECKPOINTING:
        raise ConfigError(f"model.checkpointing: {mode!r} is not one of {list(CHECKPOINTING)}")
    net.backbone.set_checkpointing(mode in ("backbone", "all"))
    net.checkpoint_decoder = mode in ("decoder", "all")



class SODNetwork(nn.Module):
    """What every network shares beyond its layers: side outputs that can be switched off and a
    decoder that can run as checkpoint segments. Subclasses name their side heads."""

    def __init__(self) -> None:
        super().__init__()
        self.aux_outputs = True
        self.checkpoint_decoder = False  # set by build_network from model.checkpointing

    def aux_modules(self) -> Iterable[nn.Module]:
        """The modules only side outputs use (frozen when side outputs are off)."""
        return self.heads[1:]

    @property
    def side_outputs(self) -> int:
        """How many side outputs ``"aux"`` holds when they are on: one per backbone level but
        the finest (which gives the main output); ``loss.aux_weights`` needs one weight each."""
        return len(self.backbone.channels) - 1

    def set_aux_outputs(self, enabled: bool) -> None:
        """Compute (and train) the side heads or not; the main output always runs."""
        self.aux_outputs = enabled
        for head in self.aux_modules():
            head.requires_grad_(enabled)

    def _top_down(self, levels: list[Tensor], image: Tensor) -> dict[str, Tensor | list[Tensor]]:
        """Run ``self._level(i, levels[i], x)`` from the coarsest level to the finest, carrying
        the running map ``x``; the finest level's logits, at the image size, are the output and
        the coarser ones the side outputs, coarse to fine."""
        sides: list[Tensor] = []
        x: Tensor | None = None
        for i in reversed(range(len(levels))):
            x, side = self._run(self._level, i, levels[i], x)
            if side is not None:
                sides.append(side)
        return {"logits": resize_to(sides[-1], image.shape[-2:]), "aux": sides[:-1]}

    def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, as one checkpoint segment when decoder checkpointing is on."""
        if self.checkpoint_decoder:
            return checkpoint_segment(fn, *args, owner=self)
        return fn(*args)
