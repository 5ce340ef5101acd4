"""A trained model from a training checkpoint, a model file or a model's name: the one way the
API, ``sodkit predict``, ``test``, ``export``, ``info`` and ``serve`` load one.

:func:`load_trained` does every step, in this order: the file read (weights mapped, not loaded;
a name fetched and cached by :mod:`sodkit.published.fetch`), the config it was trained with
(input, not trust: :mod:`sodkit.config.stored`; checked as a recipe, its network's size
bounded), the network built without random initialisation (every weight comes from the file),
the weights ``--weights`` asks for picked and checked finite
(:mod:`sodkit.checkpoint_weights`), loaded strictly by assignment (each tensor copied once, in
one thread; ``sodkit predict``'s and a GPU's: the mapped file's tensors, uncopied), and the
network moved to its device.
:func:`read_trained` is its first half alone, for a caller that starts work on the config
before the network is built (``sodkit predict`` starts its decoding workers) or needs no
network (``sodkit info``); that caller hands the :class:`TrainedFile` to :func:`load_trained`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checkpoint_weights import assign_weights, check_finite_weights, pick_weights
from .errors import UserError

if TYPE_CHECKING:
    import torch
    from torch import nn

    from .config import Config
    from .config.schema import ModelCfg

WEIGHTS = ("auto", "ema", "model")  # --weights


def checkpoint_config(state: dict[str, Any], source: Path, overrides: Sequence[str] = ()
                      ) -> Config:
    """The config a checkpoint was trained with (``overrides`` on top), checked like any config
    (ranges included: a NaN ``data.std`` would normalise every image to NaN)."""
    from .config.loader import stored_config
    from .network import NETWORKS
    from .network.size import check_network_size

    cfg = stored_config(state.get("config"), source, overrides)
    if cfg.model.name in NETWORKS:  # an unknown one is named when it is built
        # said with the file's name, before building
        check_network_size(cfg.model, NETWORKS.get(cfg.model.name), str(source))
    return cfg


def load_weights(model: nn.Module, state: dict[str, Any], source: Path, which: str = "auto",
                 mapped: bool = False) -> str:
    """Load a checkpoint's weights (``which``: auto | ema | model) into a network built for
    them, explaining a mismatch in terms of the config; returns which weights were loaded.
    ``mapped``: the file's mapped tensors become the weights, uncopied
    (:func:`~sodkit.checkpoint_weights.assign_weights`)."""
    name, weights = pick_weights(state, which, source)
    check_finite_weights(weights, name, source)
    try:
        assign_weights(model, weights, mapped)
    except RuntimeError as exc:
        config = state.get("config")
        saved = config.get("model", {}) if isinstance(config, dict) else {}
        raise UserError(
            f"{source} does not fit the configured model ({exc.__class__.__name__}). The "
            f"checkpoint was trained with model={str(saved)[:400]}; set the same model.* keys."
        ) from exc
    return name


@dataclass
class TrainedFile:
    """A checkpoint or model file, read: its state (the weights mapped, not loaded) and, when
    first asked for, its stored config (``sodkit test`` builds the recipe's network and never
    reads the stored one)."""

    source: Path
    state: dict[str, Any]
    overrides: Sequence[str] = ()

    @cached_property
    def config(self) -> Config:
        return checkpoint_config(self.state, self.source, self.overrides)

    @property
    def provenance(self) -> dict[str, Any]:
        """Where a model file's weights came from (empty for a training checkpoint)."""
        return dict(self.state.get("provenance") or {})


@dataclass
class Trained:
    """A trained network, its weights loaded, in eval mode on its device."""

    network: nn.Module
    file: TrainedFile
    weights: str  # "ema" or "model": which weights of the file were loaded
    device: torch.device | None  # None: left where it was built (the CPU)
    size: int | None = None  # the input side asked for; None: the config's data.size
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> Config:
        return self.file.config

    @property
    def source(self) -> Path:
        return self.file.source

    @property
    def input_size(self) -> int:
        return self.size or self.config.data.size


def read_trained(source: str | Path, *, by_name: bool = False, overrides: Sequence[str] = ()
                 ) -> TrainedFile:
    """The file ``source`` read (``by_name``: a model's name unless a file of that name exists,
    fetched and cached first); ``overrides``: the user's dotted keys on top of its config."""
    from .torchfile import load_checkpoint

    if by_name:
        from .published.fetch import model_source

        source = model_source(source)
    path = Path(source)
    return TrainedFile(path, load_checkpoint(path, mmap=True), tuple(overrides))


def load_trained(source: str | Path | TrainedFile, *, weights: str = "auto",
                 device: str | torch.device | None = None, size: int | None = None,
                 by_name: bool = False, model: ModelCfg | None = None,
                 aux_outputs: bool = True, checkpointing: str | None = None,
                 mapped: bool = False) -> Trained:
    """The trained model in ``source`` (a path; ``by_name``: or a model's name; or a file
    :func:`read_trained` read), ready to predict.

    ``weights`` as ``--weights``: ``auto`` (EMA when the checkpoint has it), ``ema`` or
    ``model``; ``device``: ``auto`` (CUDA when there is one), a name or a ``torch.device``;
    None: left on the CPU (export); ``size``: the input side (checked; default: the training
    size). ``model``: the network to build instead of the stored config's (``sodkit test``
    builds its recipe's); ``aux_outputs`` and ``checkpointing`` as :func:`~sodkit.network.
    build_network` and ``model.checkpointing`` (export: neither side outputs nor checkpoints).
    ``mapped``: the weights are the file's mapped pages, not a copy: for a command that ends
    when done (``sodkit predict``), never a long-lived model (a file rewritten in place would
    change its weights under it; sodkit's own writes replace a file, they never rewrite it).
    """
    from .network import build_network

    check_request(weights, size)
    file = source if isinstance(source, TrainedFile) else read_trained(source, by_name=by_name)
    built = replace(model or file.config.model, pretrained=None)
    if checkpointing is not None:
        built = replace(built, checkpointing=checkpointing)
    target = device_of(device) if device is not None else None
    network = build_network(built, aux_outputs=aux_outputs, initialise=False)  # the file's
    # on a GPU the device's copy is the one kept: the CPU's would be made only to be dropped
    mapped = mapped or (target is not None and target.type != "cpu")
    which = load_weights(network, file.state, file.source, weights, mapped)
    if target is not None:
        network = network.to(target)
    return Trained(network.eval(), file, which, target, size, file.provenance)


def check_request(weights: str, size: int | None) -> None:
    """``weights`` and ``size`` as :func:`load_trained` takes them, or one line."""
    from .config.schema import MAX_SIZE, MIN_SIZE

    if weights not in WEIGHTS:
        raise UserError(f"weights {weights!r}: choose auto, ema or model")
    if size is not None and not MIN_SIZE <= size <= MAX_SIZE:
        raise UserError(f"size {size}: must be in [{MIN_SIZE}, {MAX_SIZE}]")


def device_of(name: str | torch.device) -> torch.device:
    """``auto`` (CUDA when there is one), ``cpu``, ``cuda``, ``cuda:N``, or a device; one line
    for a name torch does not know or a CUDA device that is not there."""
    import torch

    if isinstance(name, torch.device):
        return name
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise UserError(f"device {name!r}: use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name!r}: CUDA is not available here")
    return device
