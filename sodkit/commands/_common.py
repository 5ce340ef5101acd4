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
    parser.add_argument("config", type=user_path,
                        help="YAML recipe, e.g. configs/demo.yaml; or a model file, checkpoint "
                             "or model name, whose stored config is the recipe (fine-tuning)")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="dotted overrides, e.g. train.epochs=2 data.size=256 model.backbone=resnet34",
    )


def recipe_source(text: str) -> Path:
    """What was given as CONFIG: a file as it is, or a model name (fetched and cached), whose
    model file is then the recipe."""
    from ..published.fetch import model_source

    return model_source(text)


def load_cli_config(args: argparse.Namespace) -> Config:
    """The recipe's config; of a model file or checkpoint (or a model's name), the fine-tuning
    recipe it makes (:mod:`sodkit.config.finetune`)."""
    from ..config import load_config
    from ..config.finetune import finetune_config, is_weights_file

    source = recipe_source(args.config)
    if is_weights_file(source):
        return finetune_config(source, args.overrides)
    return load_config(source, args.overrides)


def run_dir_of(cfg: Config) -> Path:
    return Path(cfg.output_root) / cfg.name


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--checkpoint PATH`` or ``--model NAME`` (one of them)."""
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--checkpoint", type=user_path,
                       help="a .pt file written by sodkit train, or a model file")
    which.add_argument("--model", metavar="NAME",
                       help="a model by name (sodkit models lists them): fetched, verified and "
                            "converted on first use, then read from the cache")


def resolve_model_argument(args: argparse.Namespace, fetch: bool = True) -> None:
    """``--model NAME`` -> ``args.checkpoint``: the cached model file (fetched first when
    ``fetch``; otherwise only where it will be, for names and checks before the work)."""
    if not getattr(args, "model", None):
        return
    from ..published.catalogue import get_entry
    from ..published.fetch import cache_paths, fetch_model

    path = fetch_model(args.model) if fetch else cache_paths(get_entry(args.model)).model
    args.checkpoint = str(path)


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

    return stored_config(state.get("config"), source)


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
        saved = state.get("config", {}).get("model", {})
        raise UserError(
            f"{source} does not fit the configured model ({exc.__class__.__name__}). The "
            f"checkpoint was trained with model={saved}; set the same model.* keys."
        ) from exc
    return name
