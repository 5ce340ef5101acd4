"""A timm ``features_only`` model behind one small interface: channels, strides, list of maps.

Networks read :attr:`Backbone.channels` and :attr:`Backbone.strides` from timm's
``feature_info`` instead of hard-coding widths, so any timm family plugs into any decoder.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import timm
import torch.nn.functional as F
from torch import Tensor, nn

from ..config.schema import ModelCfg
from ..errors import ConfigError, UserError
from . import grad_checkpoint
from .layer_decay import Rule, encoder_rules
from .levels import STRIDES_4_TO_32, StrideNeed, plan_levels
from .pyramid import SimpleFeaturePyramid, fix_vit_input_size
from .stem import stem_parameter_names
from .weights import load_matching

HUB = "timm"  # model.pretrained value: timm's own ImageNet weights (downloaded to its cache)


class Backbone(nn.Module):
    """Multi-scale feature extractor wrapping ``timm.create_model(..., features_only=True)``.

    Attributes:
        body: the timm features model. Its direct children are the stages in execution order
            (timm's ``FeatureListNet`` flattens the classifier into them), which is where per-stage
            gradient checkpointing can hook in; most timm feature models also offer
            ``body.set_grad_checkpointing()``.
        channels: channels of each returned map, high resolution first.
        strides: input-to-map reduction of each returned map, high resolution first.
    """

    def __init__(
        self,
        name: str,
        pretrained: str | None = None,
        out_indices: Sequence[int] | str | None = None,
        need: StrideNeed = STRIDES_4_TO_32,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.name = name
        from_hub = pretrained == HUB
        plan = plan_levels(name, out_indices, size_free_kwargs(name, kwargs), need)
        self.body = create_features_model(name, plan.indices, plan.kwargs, from_hub=from_hub)
        self._timm_kwargs = plan.kwargs  # how timm built it: for its layer ids (param_rules)
        info = self.body.feature_info
        self.channels: list[int] = [int(c) for c in info.channels()]
        self.strides: list[int] = [int(s) for s in info.reduction()]
        # a plain ViT: inputs padded to whole patches, its last map made a pyramid
        self.patch: int | None = self.strides[-1] if plan.plain else None
        self.pyramid: SimpleFeaturePyramid | None = None
        if plan.plain:
            self.pyramid = SimpleFeaturePyramid(self.channels[-1], self.strides[-1],
                                                need.required)
            self.channels, self.strides = list(self.pyramid.channels), list(self.pyramid.strides)
        fmt = getattr(self.body, "output_fmt", "NCHW")
        # Some families (e.g. Swin) hand out channels-last maps; decoders always get NCHW.
        self._nhwc = str(getattr(fmt, "value", fmt)).upper() == "NHWC"
        if pretrained and not from_hub:
            load_matching(self.body, pretrained, model_name=name)
        self.checkpointing: str | None = None  # None, or the granularity in use
        self.frozen = False  # set by build_network when model.freeze covers the whole encoder
        self._plan: grad_checkpoint.Plan | None = None  # segments run instead of body.forward

    def set_checkpointing(self, enabled: bool, granularity: grad_checkpoint.Granularity = "block"
                          ) -> None:
        """Gradient checkpointing of the body (see :mod:`sodkit.backbone.grad_checkpoint`)."""
        grad_checkpoint.disable(self.body)
        self._plan = grad_checkpoint.enable(self.body, granularity) if enabled else None
        self.checkpointing = granularity if enabled else None

    def train(self, mode: bool = True) -> Backbone:
        """A frozen encoder (every ``body`` parameter in ``model.freeze``) stays in eval mode:
        its norm layers keep their statistics and it runs as the feature extractor it was
        trained to be (no dropout / drop-path); a plain ViT's pyramid still trains."""
        super().train(mode)
        if self.frozen:
            self.body.eval()
        return self

    def fix_input_size(self, size: tuple[int, int], dynamic: bool) -> None:
        """Before an ONNX export: a plain ViT's position embedding resampled once for ``size``
        (:func:`~sodkit.backbone.pyramid.fix_vit_input_size`); a graph of any size
        (``dynamic``) would need the resampling ONNX cannot express: refused. Others: nothing."""
        if self.patch is None:
            return
        if dynamic:
            raise UserError(f"export --dynamic: {self.name} resamples its position embedding "
                            f"for each input size with bicubic antialiased interpolation, which "
                            f"ONNX has no operator for; export at a fixed size (--size H W)")
        fix_vit_input_size(getattr(self.body, "model", self.body), size, self.patch)

    def param_rules(self, layer_decay: float | None) -> dict[int, Rule]:
        """id(parameter) of the encoder -> (lr scale, decayed), as timm's
        ``param_groups_layer_decay`` gives them (:mod:`sodkit.backbone.layer_decay`)."""
        params = dict(self.body.named_parameters())
        rules = encoder_rules(self.body, self.name, self._timm_kwargs, layer_decay)
        return {id(params[n]): rule for n, rule in rules.items()}

    def stem_parameters(self) -> dict[str, nn.Parameter]:
        """The family's stem as timm names it (``model.freeze: [backbone.stem]``), by
        parameter name under ``backbone.body``."""
        params = dict(self.body.named_parameters())
        return {f"backbone.body.{n}": params[n]
                for n in stem_parameter_names(self.body, self.name, self._timm_kwargs)}

    @classmethod
    def from_cfg(cls, cfg: ModelCfg, need: StrideNeed = STRIDES_4_TO_32) -> Backbone:
        """Build from the ``model`` config section (backbone, pretrained, out_indices, kwargs);
        ``need``: the strides the network takes (``out_indices: auto`` picks them)."""
        return cls(cfg.backbone, cfg.pretrained, cfg.out_indices, need=need,
                   **cfg.backbone_kwargs)

    def forward(self, x: Tensor) -> list[Tensor]:
        """Feature maps (B, C_i, H / s_i, W / s_i), highest resolution first."""
        size = x.shape[-2:]
        if self.patch is not None:  # zeros (the mean pixel) right and below, to whole patches
            x = F.pad(x, (0, -size[1] % self.patch, 0, -size[0] % self.patch))
        try:
            if self._plan is not None:
                feats = grad_checkpoint.run_plan(self.body, self._plan, x)
            else:
                feats = list(self.body(x))
        except AssertionError as exc:  # timm's input-size checks (MaxViT's windows, ...)
            h, w = x.shape[-2:]
            raise UserError(
                f"model.backbone: {self.name} cannot take {h}x{w} inputs (timm: {exc}); build "
                f"it for that size (model.backbone_kwargs={{img_size: {h}}}, one size only) or "
                f"pick a size it takes") from exc
        if self._nhwc:
            feats = [f.permute(0, 3, 1, 2) for f in feats]
        if self.pyramid is not None:
            feats = self.pyramid(feats[-1], size)
        return feats


def size_free_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus what lets a family take any input size, unless the user set it.

    Swin (v1, v2) builds for one ``img_size`` and rejects other sizes; with
    ``strict_img_size=False`` timm pads to whole windows and computes the attention masks for
    the actual size, so training sizes, multi-scale lists and test sizes all work.
    """
    args = dict(kwargs)
    size_keys = {"img_size", "strict_img_size", "dynamic_img_size"}
    if name.startswith("swin") and not size_keys & set(args):
        args["strict_img_size"] = False
    return args


def create_features_model(
    name: str, out_indices: Sequence[int] | None, kwargs: dict[str, Any], from_hub: bool = False
) -> nn.Module:
    """``timm.create_model`` with features_only; config mistakes -> ConfigError. Nothing is
    downloaded unless ``from_hub`` (``model.pretrained: timm``): then timm's own hub weights."""
    if not timm.is_model(name):
        close = difflib.get_close_matches(name, timm.list_models(), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else " (see timm.list_models())"
        raise ConfigError(f"model.backbone: unknown timm model {name!r}{hint}")
    args = size_free_kwargs(name, kwargs)
    if out_indices is not None:
        args["out_indices"] = tuple(out_indices)
    if from_hub:
        return _from_hub(name, args)
    try:
        return timm.create_model(name, features_only=True, pretrained=False, **args)
    except (TypeError, ValueError, AssertionError, IndexError, RuntimeError, KeyError) as exc:
        raise ConfigError(
            f"model.backbone: timm cannot build {name!r} with features_only=True, "
            f"out_indices={out_indices}, backbone_kwargs={kwargs}: {exc}"
        ) from exc


def _from_hub(name: str, args: dict[str, Any]) -> nn.Module:
    """timm's ImageNet weights through its hub cache; an unreachable hub is one line that
    names the two ways out."""
    try:
        return timm.create_model(name, features_only=True, pretrained=True, **args)
    except (OSError, RuntimeError) as exc:  # huggingface_hub / requests errors are OSErrors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"model.pretrained: timm: cannot get {name!r}'s weights from the timm hub "
            f"({type(exc).__name__}: {first[:160]}); use a local file "
            f"(model.pretrained=/path/to/weights.pth or .safetensors) or train from scratch "
            f"(model.pretrained=null)") from exc
