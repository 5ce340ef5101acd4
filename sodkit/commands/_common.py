"""Argument and setup pieces shared by the sub-commands (light imports only at module level)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

    from ..config import Config


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``[low, high]`` (``high`` None: no upper bound).

    A value outside is a usage error that names the option and the range (exit 2), instead of
    a traceback from deep inside the command (``--batch-size 0``, ``--opset 999``).
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            allowed = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    parse.__name__ = "int"  # how argparse names the type in its own messages
    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ``[low, high]`` (``nan`` and ``inf`` refused:
    a NaN threshold would compare false everywhere and write empty masks)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not low <= value <= high:  # false for NaN
            raise argparse.ArgumentTypeError(f"must be in [{low:g}, {high:g}], got {text}")
        return value

    parse.__name__ = "float"
    return parse


def user_path(text: str) -> str:
    """An argparse ``type`` for a path the user names: ``~`` is the home folder (the shell
    expands ``--out ~/x`` but leaves ``--out=~/x`` alone, which would create ``./~/x``)."""
    return os.path.expanduser(text)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="YAML recipe, e.g. configs/demo.yaml")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="dotted overrides, e.g. train.epochs=2 data.size=256 model.backbone=resnet34",
    )


def load_cli_config(args: argparse.Namespace) -> Config:
    from ..config import load_config

    return load_config(args.config, args.overrides)


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.output_root) / cfg.name


def add_weights_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--weights", choices=["auto", "ema", "model"], default="auto",
                        help="which weights of the checkpoint: the EMA average (train.ema_decay) "
                             "or the trained model; auto: ema when the checkpoint has it")


def pick_weights(state: dict[str, Any], which: str, source: Path) -> tuple[str, dict[str, Any]]:
    """``(name, state dict)`` of the weights ``--weights`` asks for."""
    from ..errors import UserError

    if state.get("model_file"):  # one set of weights, the one its provenance names
        held = str(state.get("provenance", {}).get("weights", "model"))
        if which not in ("auto", held):
            raise UserError(f"{source} is a model file holding the {held} weights only; drop "
                            f"--weights {which}, or export the {which} weights from the "
                            f"training checkpoint")
        return held, state["model"]
    ema = state.get("ema")
    if which == "ema" and not ema:
        raise UserError(f"{source} has no EMA weights (trained without train.ema_decay); "
                        f"use --weights model")
    if which != "model" and ema:
        return "ema", ema["model"]
    return "model", state["model"]


def check_finite_weights(weights: dict[str, Any], name: str, source: Path) -> None:
    """Weights with a NaN or an infinity (a run that diverged) would predict NaN everywhere,
    which quantises to all-black masks: refused once, when they are loaded."""
    bad = [key for key, value in weights.items()
           if hasattr(value, "is_floating_point") and value.is_floating_point()
           and not _all_finite(value)]
    if bad:
        from ..errors import UserError

        other = "; or --weights model" if name == "ema" else ""
        raise UserError(f"{source}: the {name} weights hold NaN or infinite values ({len(bad)} "
                        f"tensors, e.g. {bad[0]}): the run had diverged when it was saved; use "
                        f"an earlier checkpoint{other}")


def _all_finite(value: Any) -> bool:
    """Exactly ``value.isfinite().all()``, about 20x faster for a finite tensor (ResNet-18's
    weights: 5 ms against 90 ms, a fixed cost of every ``sodkit predict``): one NaN or
    infinity makes the sum non-finite, so a finite sum proves them all finite; a sum that is
    not (an overflow of large finite values) is checked element by element."""
    return bool(value.sum().isfinite()) or bool(value.isfinite().all())


def checkpoint_config(state: dict[str, Any], source: Path) -> Config:
    """The config a checkpoint was trained with, checked like any config (ranges included: a
    NaN ``data.std`` would normalise every image to NaN)."""
    from ..config.loader import stored_config
    from ..network.size import check_network_size

    cfg = stored_config(state.get("config"), source)
    check_network_size(cfg.model, str(source))  # said with the file's name, before building
    return cfg


def load_weights(model: nn.Module, state: dict[str, Any], source: Path, which: str = "auto"
                 ) -> str:
    """Load a checkpoint's weights (``which``: auto | ema | model), explaining a mismatch in
    terms of the config; returns which weights were loaded."""
    from ..errors import UserError

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


def check_model_files(cfg: Config, init_from: bool = True) -> None:
    """Before any work: the weights files a recipe names exist (``model.pretrained``, and
    ``model.init_from`` unless the run resumes: it then starts from its own state), instead of
    failing once the data and the network are built."""
    from ..errors import UserError

    model = cfg.model
    for key, value in (("model.pretrained", model.pretrained if model.pretrained != "timm"
                        else None), ("model.init_from", model.init_from if init_from else None)):
        if value and Path(value).expanduser().is_dir():
            raise UserError(f"{key}: {value} is a folder; give the weights file")
        if value and not Path(value).expanduser().is_file():
            raise UserError(f"{key}: file not found: {value}")
