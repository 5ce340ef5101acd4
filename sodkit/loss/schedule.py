"""Loss term weights as a function of the epoch: ``loss.schedule``.

A run's term weights start as ``loss.terms`` gives them; each phase, from its first epoch to the
end of the run, sets some weights (``terms``) and multiplies others (``scale``), once or, with
``per_epoch``, once more every epoch of the phase (``factor ** k`` in its k-th epoch). BiRefNet's
``finetune_last_epochs`` is one such phase: in its last N epochs train.py multiplies the pixel
loss weights in place at the start of every epoch (``bce *= 0``, ``iou *= 0.5``, ``mae *=
0.9``), so they compound: ``{from_epoch: -N, scale: {...}, per_epoch: true}``.

The weights are a pure function of the epoch (nothing is accumulated), so a resumed run uses
exactly the weights an uninterrupted one would; the original's in-place products restart from
the config's weights when its training is resumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..config.rules import check_phase
from ..config.schema import LossCfg, LossPhaseCfg


@dataclass(frozen=True)
class Phase:
    """A ``loss.schedule`` entry with its first epoch resolved (1-based, as the log counts)."""

    index: int  # its place in loss.schedule (named in logs and errors)
    start: int
    terms: dict[str, float]
    scale: dict[str, float]
    per_epoch: bool


class LossSchedule:
    """``weights(epoch)``: the term weights of a (1-based) epoch; ``phase(epoch)``: the index of
    the latest phase started by then (None before the first)."""

    def __init__(self, base: Mapping[str, float], phases: list[Phase]) -> None:
        self.base = dict(base)
        self.phases = sorted(phases, key=lambda p: p.start)  # stable: list order at equal starts

    def weights(self, epoch: int) -> dict[str, float]:
        weights = dict(self.base)
        for phase in self.phases:
            if phase.start > epoch:
                break
            weights.update(phase.terms)
            power = epoch - phase.start + 1 if phase.per_epoch else 1
            for name, factor in phase.scale.items():
                weights[name] = weights[name] * factor ** power
        return weights

    def phase(self, epoch: int) -> Phase | None:
        started = [p for p in self.phases if p.start <= epoch]
        return started[-1] if started else None

    def describe(self, epoch: int) -> str:
        """The log line of the phase in effect at ``epoch`` (its start, or a resume into it)."""
        phase = self.phase(epoch)
        weights = ", ".join(f"{k} {v:.4g}" for k, v in self.weights(epoch).items())
        if phase is None:
            return f"loss weights: {weights}"
        again = (" (scale applied again every epoch: " + ", ".join(
            f"{k} x{v:g}" for k, v in phase.scale.items()) + ")") if phase.per_epoch else ""
        return (f"loss.schedule.{phase.index} from epoch {phase.start}: loss weights at epoch "
                f"{epoch}: {weights}{again}")


def resolve_start(phase: LossPhaseCfg, epochs: int) -> int:
    """``from_epoch`` (never 0: :func:`sodkit.config.rules.check_phase`) as a 1-based epoch: -N
    is the last N epochs (the whole run when N is at least the run's length, as the original's
    ``epoch > epochs - N``)."""
    if phase.from_epoch < 0:
        return max(epochs + phase.from_epoch + 1, 1)
    return phase.from_epoch


def scheduled_names(cfg: LossCfg) -> set[str]:
    """Terms a phase gives a positive weight (built even when ``loss.terms`` gives them 0)."""
    return {name for phase in cfg.schedule for name, w in phase.terms.items() if w > 0}


def build_schedule(cfg: LossCfg, base: Mapping[str, float], epochs: int) -> LossSchedule | None:
    """The checked schedule over ``base`` (each ``loss.terms`` name -> its weight); None without
    one. A name that is not one of ``loss.terms`` is a config error naming its key."""
    if not cfg.schedule:
        return None
    phases = []
    for i, entry in enumerate(cfg.schedule):
        check_phase(entry, f"loss.schedule.{i}", base)  # checked at load too: a LossCfg of code
        phases.append(Phase(i, resolve_start(entry, epochs), dict(entry.terms),
                            dict(entry.scale), entry.per_epoch))
    return LossSchedule(base, phases)
