"""Config values derived from other sections while the config is read, so that the stored
config (checkpoint, model file) says what was built.

- Backbone families whose attention windows are fixed when the model is built (timm's
  ``maxxvit`` module: MaxViT, MaxxViT, CoAtNet). Built for 224 px, they take only inputs their
  windows divide, so ``model.backbone_kwargs.img_size`` is set from ``data.size``: a recipe runs
  on them with ``model.backbone=NAME`` alone, as on any other family. The family is told by its
  name, not by importing timm: reading a config stays cheap (``sodkit eval`` forks its workers
  from a process that must not have imported torch). ``tests/test_backbone_auto.py`` checks the
  names against timm's own module listing.
- ``model.birefnet.batchnorm: auto`` from ``data.batch_size``.
"""
from __future__ import annotations

import dataclasses

from .schema import Config

# first part of the model name -> the model is in timm's maxxvit module
FIXED_SIZE_FAMILIES = ("coatnet", "coatnext", "maxvit", "maxxvit", "maxxvitv2", "test_coatnet",
                       "test_maxvit")
SIZE_KEYS = ("img_size", "dynamic_img_size", "strict_img_size")


def is_fixed_size(backbone: str) -> bool:
    """``maxvit_tiny_tf_224.in1k`` -> True (the pretrained tag after the dot is ignored)."""
    name = backbone.split(".", 1)[0]
    return name in FIXED_SIZE_FAMILIES or name.split("_", 1)[0] in FIXED_SIZE_FAMILIES


def fit_backbone_size(cfg: Config, error: type[Exception]) -> Config:
    """``cfg`` with ``img_size: data.size`` for a fixed-size family, unless a size key is set.

    Multi-scale training cannot work with one built size: ``data.size_list`` is refused in one
    line that says what to do.
    """
    model = cfg.model
    if not is_fixed_size(model.backbone) or set(SIZE_KEYS) & set(model.backbone_kwargs):
        return cfg
    if cfg.data.size_list:
        raise error(f"data.size_list: {model.backbone} is built for one input size (its "
                    f"attention windows fix it), so multi-scale training cannot run on it; leave "
                    f"data.size_list empty or pick a family that takes any size (ResNet, "
                    f"ConvNeXt, Swin, PVTv2, ...)")
    kwargs = {**model.backbone_kwargs, "img_size": cfg.data.size}
    return dataclasses.replace(cfg, model=dataclasses.replace(model, backbone_kwargs=kwargs))


def fit_birefnet_batchnorm(cfg: Config) -> Config:
    """``model.birefnet.batchnorm: auto``: BatchNorm in the decoder when the per-process batch
    has more than one image, as the original's ``config.batch_size > 1``. Resolved here so that
    the stored config (checkpoint, model file) says what was built."""
    opts = cfg.model.birefnet
    if opts.batchnorm != "auto":
        return cfg
    opts = dataclasses.replace(opts, batchnorm=cfg.data.batch_size > 1)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, birefnet=opts))
