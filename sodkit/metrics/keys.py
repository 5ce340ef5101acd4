"""Which result keys exist, which way each is better, and which family computes it.

One place for what the checkpoint selection (``eval.metric``: which ``best.pt`` is kept) and the
tables (the best three of a column) both need: a metric that is an error (MAE, BER, HCE, MSE,
siMAE) is better lower, every other one higher. A family declares its own errors
(``Family.lower_is_better``), so a new family ranks and selects checkpoints the right way
without a list to update elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import ConfigError
from .families import FAMILIES, family_keys, resolve, sequences
from .results import METRIC_KEYS

STANDARD_ERRORS = frozenset({"MAE", "maxBER", "meanBER", "adpBER"})


def lower_is_better(metric: str) -> bool:
    """True for errors (MAE, BER, and the families' errors: HCE, MSE, siMAE), False for scores."""
    if metric in STANDARD_ERRORS or metric.endswith("BER"):
        return True
    return any(metric in family.lower_is_better for family in FAMILIES.values())


def selectable_keys() -> tuple[str, ...]:
    """Every scalar result key: the standard set's, then each family's (registry order)."""
    return METRIC_KEYS + family_keys()


def family_of(metric: str) -> str | None:
    """The family whose result holds ``metric`` (None: a standard key, or no key at all)."""
    return next((name for name, family in FAMILIES.items() if metric in family.keys), None)


def families_with(compute: Iterable[str] | str | None, metric: str) -> tuple[str, ...]:
    """The families of ``compute`` and the one ``metric`` needs (``eval.metric: HCE`` computes
    HCE without ``eval.compute`` naming it), resolved (see ``families.resolve``)."""
    chosen = [compute] if isinstance(compute, str) else list(compute or ())
    owner = family_of(metric)
    families = resolve(chosen + ([owner] if owner else []))
    if sequences(families):  # a ValueError: check_selection makes it a config error
        raise ConfigError(f"{sequences(families)[0]} is measured over the frames of each video "
                          f"by sodkit eval --groups, not during training")
    return families



SUMMARY_KEYS = ("MAE", "Smeasure", "wFmeasure", "maxFm", "maxEm")  # a log line's standard set


def summary_line(values: dict[str, float]) -> str:
    """A dataset's numbers for a log line: the usual five, then every computed family key
    (a DIS run's HCE, maxBIoU, mBA ...), which would otherwise be in the files alone."""
    keys = [*SUMMARY_KEYS, *family_keys()]
    return ", ".join(f"{key} {values[key]:.4f}" for key in keys if key in values)
