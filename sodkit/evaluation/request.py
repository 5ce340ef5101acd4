"""What one folder evaluation is asked to do: the typed request that ``sodkit eval`` builds from
its options and a Python caller builds by hand (:func:`sodkit.evaluation.evaluate_folders`).

Its fields are the command's options, under the same names and in the same forms (``--gt
NAME=DIR`` is ``gt=["NAME=DIR"]``), so that an error names the option a command-line user gave
and the two ways cannot drift apart. The values an option's parser checks (a count of workers,
of resamples, a curve's name) are checked here as well, so a request built in Python is refused
in one line just as the command's options are.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from ..argtypes import int_in
from ..errors import UserError
from ..report.curve_kinds import DEFAULT_KINDS, parse_kinds


def _paper_metrics() -> str:
    from ..report.ranking import PAPER_METRICS  # imports the metrics: not at import time

    return ",".join(PAPER_METRICS)


@dataclass
class EvalRequest:
    """One evaluation of saved predictions against GT masks (each field: the option of
    ``sodkit eval`` named in its comment; ``sodkit eval --help`` says more).

    Example::

        EvalRequest(gt=["ECSSD=data/ECSSD/GT"], pred=["MINet=preds/MINet"], out="results")
    """

    # what is measured, and where the results go
    gt: list[str]  # --gt [NAME=]DIR (empty: the datasets_file names them)
    out: str | Path  # --out
    pred: list[str] = field(default_factory=list)  # --pred [NAME=]DIR[:SUFFIX]
    method_files: list[str | Path] = field(default_factory=list)  # --methods FILE
    datasets_file: str | Path | None = None  # --datasets FILE (PySODEvalToolkit's JSON)
    pred_prefix: str = ""  # --pred-prefix
    pred_suffix: str = ""  # --pred-suffix
    # selection
    include_methods: list[str] | None = None  # --include-methods
    exclude_methods: list[str] | None = None  # --exclude-methods
    include_datasets: list[str] | None = None  # --include-datasets
    exclude_datasets: list[str] | None = None  # --exclude-datasets
    stem_list: list[str] = field(default_factory=list)  # --list [NAME=]FILE
    allow_missing: bool = False  # --allow-missing
    groups: bool = False  # --groups
    frames: slice | None = None  # --frames START:END
    # what is computed
    compute: str = ""  # --compute FAMILY,... (or all)
    images: list[str] = field(default_factory=list)  # --images [NAME=]DIR
    trimaps: list[str] = field(default_factory=list)  # --trimaps [NAME=]DIR
    ci: bool = False  # --ci
    baseline: str | None = None  # --baseline NAME
    ci_resamples: int = 1000  # --ci-resamples
    ci_seed: int = 0  # --ci-seed
    # what is written
    force: bool = False  # --force
    curves: tuple[str, ...] = DEFAULT_KINDS  # --curves
    latex: str | Path | None = None  # --latex FILE.tex
    latex_style: str = "fonts"  # --latex-style
    latex_ci: bool = False  # --latex-ci
    latex_transpose: bool = False  # --latex-transpose
    xlsx: str | Path | None = None  # --xlsx FILE.xlsx
    metrics: str = field(default_factory=_paper_metrics)  # --metrics: the paper tables' columns
    decimals: int = 3  # --decimals
    # how
    workers: int | None = None  # --workers (None: the cores of this process)
    show: Callable[[str], None] | None = None  # each table, as text (the command prints them)
    # the prefix and suffix of each dataset's GT and image files, from datasets_file
    gt_namings: dict[str, tuple[str, str]] = field(default_factory=dict, init=False, repr=False)
    image_namings: dict[str, tuple[str, str]] = field(default_factory=dict, init=False,
                                                      repr=False)

    def __post_init__(self) -> None:
        if not str(self.out).strip():
            raise UserError("out: name the folder for the results (--out)")
        bounds = {"workers": int_in(1), "ci_resamples": int_in(100, 1_000_000),
                  "ci_seed": int_in(0), "decimals": int_in(0, 9)}
        for name, parse in bounds.items():
            value = getattr(self, name)
            if value is not None:
                _checked(name, lambda parse=parse, value=value: parse(str(value)))
        _checked("curves", lambda: parse_kinds(",".join(self.curves)))
        if self.latex_style not in ("fonts", "colors"):
            raise UserError(f"latex_style {self.latex_style!r}: fonts or colors")
        for name in ("include_methods", "exclude_methods", "include_datasets",
                     "exclude_datasets"):
            names = getattr(self, name)
            if names is not None and (isinstance(names, str) or not all(names)):
                raise UserError(f"{name}: expected a list of names, none empty")

    def copy(self) -> EvalRequest:
        """A request of its own (the evaluation adds a datasets file's entries to its lists)."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return EvalRequest(**{name: list(value) if isinstance(value, list) else value
                              for name, value in values.items()})


def _checked(name: str, parse: Callable[[], object]) -> None:
    try:
        parse()
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"{name}: {exc}") from None
