"""``model.freeze: [backbone.stem]``: the encoder's stem in any family, as timm names it.

F3Net's code trains without its ResNet's ``conv1`` / ``bn1``. Written as those names, the recipe
would fit only ResNets; timm's ``group_matcher(coarse=True)["stem"]`` names each family's stem
(ResNet: ``conv1`` / ``bn1``; ConvNeXt, RegNet, MaxViT: ``stem``; EfficientNet: ``conv_stem`` /
``bn1``; ViT, Swin, PVTv2: the patch embedding with its position embedding and tokens), so
one key freezes the same part of every family.
"""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from .layer_decay import meta_model
from .weights import match_keys

STEM = "backbone.stem"  # the model.freeze entry


def _patterns(matcher: Any) -> list[str]:
    """timm's matcher value: a regex, or a list of (regex, ordinal) pairs."""
    if isinstance(matcher, str):
        return [matcher]
    return [item[0] if isinstance(item, tuple) else item for item in matcher or []]


def stem_parameter_names(body: nn.Module, name: str, kwargs: dict[str, Any]) -> list[str]:
    """Names of ``body``'s parameters in the family's stem (empty: timm names none)."""
    probe = meta_model(name, kwargs)
    if probe is None or not hasattr(probe, "group_matcher"):
        return []
    patterns = _patterns(probe.group_matcher(coarse=True).get("stem"))
    theirs = [n for n, _ in probe.named_parameters()]
    mapping = match_keys([n for n, _ in body.named_parameters()], theirs)
    return [mine for mine, their in mapping.items()
            if any(re.match(pattern, their) for pattern in patterns)]
