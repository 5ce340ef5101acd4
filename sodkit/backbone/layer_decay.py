"""Per-parameter learning-rate scale and weight decay of a timm encoder, as timm gives them.

timm knows each family's layer ids (``group_matcher``: patch embedding first, then every block,
then the final norm and the head) and which tensors take no weight decay (``no_weight_decay``:
position embeddings, class / register / distillation tokens, relative position tables).
sodkit asks timm's own ``param_groups_layer_decay`` on the classifier model, built on the meta
device, and maps its parameter names to the features model's (timm's feature wrappers rename
them: :func:`~sodkit.backbone.weights.canonical_key`), so ``optim.layer_decay`` and the
no-decay rules are timm's semantics for every family.
"""

from __future__ import annotations

import logging
from typing import Any

import timm
import torch
from timm.optim import param_groups_layer_decay
from torch import nn

from ..module.no_init import skip_parameter_init
from .weights import match_keys

log = logging.getLogger(__name__)

# (lr scale, decayed) of one encoder parameter; the scale is layer_decay ** (layers above it)
Rule = tuple[float, bool]


def meta_model(name: str, kwargs: dict[str, Any]) -> nn.Module | None:
    """timm's classifier model of the family, on the meta device (no memory, no weights): what
    timm knows about its layers; None when it cannot be built."""
    try:
        with torch.device("meta"), skip_parameter_init():  # nothing to initialise either
            return timm.create_model(name, pretrained=False, **kwargs)
    except Exception:  # noqa: BLE001 - no probe: every parameter gets the plain rules
        return None


def encoder_rules(body: nn.Module, name: str, kwargs: dict[str, Any],
                  layer_decay: float | None) -> dict[str, Rule]:
    """``body``'s parameter name -> (lr scale, decayed), from timm's ``param_groups_layer_decay``
    with ``layer_decay`` (None: 1, scales all 1) and the model's ``no_weight_decay`` list.
    Parameters timm's model does not have (none in practice) are left out: the caller uses its
    plain rules for them."""
    probe = meta_model(name, kwargs)
    if probe is None:
        return {}
    no_decay = sorted(probe.no_weight_decay()) if hasattr(probe, "no_weight_decay") else []
    try:
        groups = param_groups_layer_decay(probe, weight_decay=1.0, no_weight_decay_list=no_decay,
                                          layer_decay=1.0 if layer_decay is None else layer_decay)
    except Exception as exc:  # noqa: BLE001 - a family timm cannot group: the plain rules
        if layer_decay is not None:
            log.warning("optim.layer_decay: timm cannot group %s's layers (%s); every backbone "
                        "parameter keeps the backbone lr", name, exc)
        return {}
    names = {id(p): n for n, p in probe.named_parameters()}
    probe_rules = {names[id(p)]: (float(g["lr_scale"]), g["weight_decay"] > 0)
                   for g in groups for p in g["params"]}
    mapping = match_keys([n for n, _ in body.named_parameters()], list(probe_rules))
    return {mine: probe_rules[theirs] for mine, theirs in mapping.items()}

