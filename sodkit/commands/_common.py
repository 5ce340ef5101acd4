"""Argument and setup pieces shared by the sub-commands (light imports only at module level)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import user_path

if TYPE_CHECKING:

    from ..config import Config


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
    recipe it makes (:mod:`sodkit.finetune`)."""
    from ..config import load_config
    from ..finetune import finetune_config, is_weights_file

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


def add_runtime_arguments(parser: argparse.ArgumentParser, precision: str | None = "fp32"
                          ) -> None:
    """``--runtime`` and ``--precision`` (:mod:`sodkit.runners.choice`); ``precision``: the
    default (None: the config's ``eval.precision``)."""
    from ..runners.choice import PRECISIONS, RUNTIMES

    parser.add_argument("--runtime", choices=RUNTIMES, default="auto",
                        help="what runs the network: torch (PyTorch), onnx (onnxruntime on the "
                             "CPU: the graph is exported once and cached; needs "
                             "sodkit[export]), auto (default: onnx on the CPU where onnxruntime "
                             "is installed, else torch)")
    parser.add_argument("--precision", choices=PRECISIONS, default=precision,
                        help="fp32 (default" + ("" if precision else ": the config's "
                                                "eval.precision") + "); bf16: PyTorch "
                             "autocast on CUDA or a CPU with AVX-512-BF16/AMX; fp16: CUDA; "
                             "int8: onnxruntime, quantized (docs/inference.md: what each "
                             "costs in accuracy)")
