"""The allowed range of every numeric config key, declared beside its default; and the keys
that hold a path, whose ``~`` is expanded.

A schema field states its range once, ``lr: float = ranged(1e-3, above=0)``, and
:func:`check_ranges` checks every such field of a built config section in one pass (the loader
calls it for each section it builds: recipes, overrides and the configs stored in checkpoints).
A comparison with NaN is always false, so ``lr <= 0`` lets a NaN through; the check here asks
the opposite question (is the value inside the range?) and wants a finite number first. The
message names the key and the range, e.g. ``optim.momentum: must be in [0, 1), got -1.0``.

Lists are checked value by value (``data.std.1``) and, with ``length``, for their length.
Dict-valued keys (``loss.terms``, ``model.backbone_kwargs``) hold numbers whose meaning belongs
to their users (``build_criterion``, timm), which check them with :func:`check_number`.

A path key (``output_root: str = path_field("output")``) gets its ``~`` expanded when the
section is built, so ``output_root=~/runs`` means the home folder everywhere the value is used,
not a folder named ``~`` in the current one.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import UserError

RANGE = "range"  # the key of a field's metadata holding its Range
PATH = "path"  # a field's metadata key marking a path ("~" expanded)


@dataclass(frozen=True)
class Range:
    """``low <= value <= high`` (``low_open`` / ``high_open``: strict), finite; None: no bound.

    ``hint`` ends the error message in parentheses: what the value means or what to use instead.
    ``length``: lists must have exactly this many values.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    hint: str = ""
    length: int | None = None

    def holds(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.low is not None and not (value > self.low if self.low_open else value >= self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def text(self) -> str:
        """The range as a user reads it: ``> 0``, ``>= 1``, ``in [0, 1)``."""
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{_num(self.low)}, {_num(self.high)}{right}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {_num(self.low)}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {_num(self.high)}"
        return "a finite number"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else str(value)


def ranged(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
           low: float | None = None, high: float | None = None, above: float | None = None,
           below: float | None = None, hint: str = "", length: int | None = None) -> Any:
    """A dataclass field with ``default`` (or ``factory`` for lists) and a :class:`Range`:
    ``low <= value <= high``, ``above < value < below`` (mix them: ``low=0, below=1``)."""
    rule = Range(low=above if above is not None else low, high=below if below is not None else high,
                 low_open=above is not None, high_open=below is not None, hint=hint,
                 length=length)
    meta = {RANGE: rule}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def path_field(default: str | None) -> Any:
    """A dataclass field holding a path: ``~`` and ``~user`` are expanded when it is loaded."""
    return dataclasses.field(default=default, metadata={PATH: True})


def expand_paths(section: Any) -> None:
    """Expand ``~`` in the path fields of dataclass instance ``section``, in place."""
    for item in dataclasses.fields(section):
        value = getattr(section, item.name)
        if item.metadata.get(PATH) and isinstance(value, str) and value.startswith("~"):
            setattr(section, item.name, os.path.expanduser(value))


def check_number(value: Any, rule: Range, key: str, error: type[Exception] = UserError) -> None:
    """Raise ``error`` naming ``key`` and ``rule``'s range unless ``value`` is inside it."""
    if rule.holds(value):
        return
    finite = "a finite number " if isinstance(value, float) and not math.isfinite(value) else ""
    hint = f" ({rule.hint})" if rule.hint else ""
    raise error(f"{key}: must be {finite}{rule.text()}, got {value}{hint}")


def check_ranges(section: Any, prefix: str, error: type[Exception] = UserError) -> None:
    """Check every ranged field of dataclass instance ``section`` (keys named ``prefix + name``);
    None is allowed where the field's type allows it (the loader has checked types)."""
    for item in dataclasses.fields(section):
        rule = item.metadata.get(RANGE)
        value = getattr(section, item.name)
        if rule is None or value is None or isinstance(value, str):  # None / a word: no range
            continue
        key = prefix + item.name
        if isinstance(value, list):
            if rule.length is not None and len(value) != rule.length:
                raise error(f"{key}: must hold {rule.length} values, got {len(value)} ({value})"
                            + (f" ({rule.hint})" if rule.hint else ""))
            for i, number in enumerate(value):
                if isinstance(number, list):  # a pair, e.g. data.size_list's [height, width]
                    for j, inner in enumerate(number):
                        check_number(inner, rule, f"{key}.{i}.{j}", error)
                else:
                    check_number(number, rule, f"{key}.{i}", error)
        else:
            check_number(value, rule, key, error)


def numeric_keys(cls: type, prefix: str = "") -> dict[str, dataclasses.Field]:
    """Every field of ``cls`` and its nested sections that holds numbers (int, float, lists of
    them), by dotted key: what must carry a range (tests/test_config_ranges.py checks it)."""
    import typing

    found: dict[str, dataclasses.Field] = {}
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        tp = hints[item.name]
        if dataclasses.is_dataclass(tp):
            found.update(numeric_keys(tp, f"{prefix}{item.name}."))
            continue
        args = {tp, *typing.get_args(tp)}
        for arg in list(args):
            args.update(typing.get_args(arg))
        if args & {int, float}:
            found[prefix + item.name] = item
    return found
