"""What building a network would allocate, measured before it is built (#32 item 5).

Every setting of a network is bounded on its own, but the memory of a build is a product of
them, and ``model.backbone_kwargs`` reach timm unchecked: a stored ``num_classes`` of millions
made timm allocate an 11 GB classifier head (thrown away at once: a features-only model drops
it) before anything else ran. So the network is first built on the ``meta`` device, where
tensors have shapes and no memory, while every tensor created is counted (:class:`_Count`, a
dispatch mode: heads and probe models that are built and dropped count too). A network that
would allocate more than ``SODKIT_MAX_NETWORK_MB`` in all (default 16384 MiB: what the build of
a network of two billion float32 parameters allocates; BiRefNet's Swin-L: 1,638 MiB) is refused
with one line naming its largest tensor and the settings that make a network large. A meta
build takes 0.03 s for a ResNet-18 FPN and 0.2-0.4 s for BiRefNet; a network that cannot be
built on ``meta`` is not estimated.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import replace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..config.schema import ModelCfg
from ..errors import ConfigError, UserError

logger = logging.getLogger(__name__)

MAX_MB_VARIABLE = "SODKIT_MAX_NETWORK_MB"
DEFAULT_MAX_MB = 16384
_MIB = 1 << 20
# aten functions that create a tensor of their own (factories, copies): what a build allocates
_NEW = ("empty", "empty_strided", "empty_like", "zeros", "zeros_like", "ones", "ones_like",
        "full", "full_like", "rand", "randn", "randint", "arange", "linspace", "eye",
        "scalar_tensor", "clone", "_to_copy", "new_empty", "new_zeros", "new_ones", "new_full")
# a config's estimate (bytes, (the largest tensor's bytes, its shape)), once per process
_checked: dict[str, tuple[int, tuple[int, list[int]]]] = {}


class _Count(TorchDispatchMode):
    """The bytes of every tensor a factory or copy creates, and the largest one's shape. A
    probe model built and dropped counts too (timm builds one to read a family's levels), so
    this bounds what a build allocates in all, above what it keeps (about twice, for a timm
    ResNet)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.largest: tuple[int, list[int]] = (0, [])

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in _NEW and isinstance(out, torch.Tensor):
            size = out.numel() * out.element_size()
            self.bytes += size
            if size > self.largest[0]:
                self.largest = (size, list(out.shape))
        return out


def max_bytes() -> int:
    text = os.environ.get(MAX_MB_VARIABLE, "").strip()
    if not text:
        return DEFAULT_MAX_MB * _MIB
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{MAX_MB_VARIABLE}={text!r}: the most MiB a network's build may "
                        f"allocate, a number > 0 (default {DEFAULT_MAX_MB})")
    return int(value * _MIB)


def _knobs(cfg: ModelCfg) -> str:
    """The settings that make a network large, as the config sets them."""
    numbers = {k: v for k, v in cfg.backbone_kwargs.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    kwargs = ", ".join(f"{k}={v}" for k, v in numbers.items())
    return (f"model.backbone {cfg.backbone}, model.decoder_channels {cfg.decoder_channels}"
            + (f", model.backbone_kwargs {kwargs}" if kwargs else ""))


def check_network_size(cfg: ModelCfg, build: Any, source: str = "") -> None:
    """Refuse a network whose build would allocate more than ``SODKIT_MAX_NETWORK_MB``;
    ``source``: the file whose stored config it is (named in the message). Its weights file
    (``model.pretrained``) is not read: shapes are all the estimate needs. ``build``: the
    network's registered builder (``ModelCfg -> nn.Module``)."""
    limit = max_bytes()
    cfg = replace(cfg, pretrained=None, init_from=None, checkpointing="off", freeze=[])
    key = repr(cfg)
    if key not in _checked:
        if torch.empty(0).device.type == "meta":  # built on meta anyway: nothing allocated
            return
        from ..module.no_init import skip_parameter_init

        counter = _Count()
        try:
            with torch.device("meta"), skip_parameter_init(), counter:
                build(cfg)
        except (ConfigError, UserError):
            raise
        except Exception as exc:  # a network that needs real values to build: not estimated
            logger.debug("network size not estimated (%s: %s)", type(exc).__name__, exc)
            return
        _checked[key] = (counter.bytes, counter.largest)
    total, (largest, shape) = _checked[key]
    if total <= limit:
        return
    where = f"{source}: the config stored in it: " if source else ""
    raise ConfigError(
        f"{where}building this network would allocate {total / _MIB:,.0f} MiB of tensors, more "
        f"than {MAX_MB_VARIABLE}={limit // _MIB}; its largest is {shape} ({largest / _MIB:,.0f} "
        f"MiB). Lower what makes it that large ({_knobs(cfg)}), or raise {MAX_MB_VARIABLE}")
