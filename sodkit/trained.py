"""A trained model from a training checkpoint or a model file: the config it was trained with
(checked as a recipe, its network's size bounded) and its weights loaded into a built network
(which weights, and whether they are usable: :mod:`sodkit.checkpoint_weights`). The API and the
commands that run a trained model (predict, test, export, info) use these, so each check is made
the same way everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checkpoint_weights import check_finite_weights, pick_weights
from .errors import UserError

if TYPE_CHECKING:
    from torch import nn

    from .config import Config


def checkpoint_config(state: dict[str, Any], source: Path) -> Config:
    """The config a checkpoint was trained with, checked like any config (ranges included: a
    NaN ``data.std`` would normalise every image to NaN)."""
    from .config.loader import stored_config
    from .network import NETWORKS
    from .network.size import check_network_size

    cfg = stored_config(state.get("config"), source)
    if cfg.model.name in NETWORKS:  # an unknown one is named when it is built
        # said with the file's name, before building
        check_network_size(cfg.model, NETWORKS.get(cfg.model.name), str(source))
    return cfg


def load_weights(model: nn.Module, state: dict[str, Any], source: Path, which: str = "auto"
                 ) -> str:
    """Load a checkpoint's weights (``which``: auto | ema | model), explaining a mismatch in
    terms of the config; returns which weights were loaded."""
    name, weights = pick_weights(state, which, source)
    check_finite_weights(weights, name, source)
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        config = state.get("config")
        saved = config.get("model", {}) if isinstance(config, dict) else {}
        raise UserError(
            f"{source} does not fit the configured model ({exc.__class__.__name__}). The "
            f"checkpoint was trained with model={str(saved)[:400]}; set the same model.* keys."
        ) from exc
    return name
