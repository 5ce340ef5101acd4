"""``sodkit eval``: measure saved predictions of any number of methods against GT folders.

This module holds the command's options and the :class:`~sodkit.evaluation.EvalRequest` built
from them; the evaluation itself, the same for a Python caller, is
:func:`sodkit.evaluation.evaluate_folders` (the plan, the measuring, the files).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..argtypes import int_in, user_path

if TYPE_CHECKING:
    from ..evaluation import EvalRequest

HELP = "evaluate saved predictions of one or more methods against GT masks (tables + curves)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..report.curve_kinds import DEFAULT_KINDS, KINDS, parse_kinds
    from ..report.named_outputs import add_table_arguments

    parser.add_argument(
        "--gt", action="append", default=[], metavar="[NAME=]DIR",
        help="GT mask folder; repeat as NAME=DIR for several datasets, whose predictions are "
             "then read from <pred DIR>/NAME/ (or name them in a --datasets file)")
    parser.add_argument(
        "--pred", action="append", default=[], metavar="[NAME=]DIR[:SUFFIX]",
        help="a method's prediction folder (NAME defaults to the folder's name); repeatable. "
             "DIR:SUFFIX reads <stem>SUFFIX.<ext> (e.g. preds/MINet:_sal), "
             "DIR:PREFIX{stem}SUFFIX both")
    _add_file_arguments(parser)  # --methods, --datasets
    parser.add_argument("--pred-prefix", default="",
                        help="prediction file names start with this before the GT stem")
    parser.add_argument("--pred-suffix", default="",
                        help="prediction file names end with this after the GT stem, e.g. _sal "
                             "for <stem>_sal.png (may end with an extension: _sal.png)")
    parser.add_argument("--out", required=True, type=user_path, help="folder for results.{json,"
                        "md,csv}, pr.png, fm.png (a sub-folder per named dataset)")
    parser.add_argument("--force", action="store_true",
                        help="replace files that sodkit eval did not write, or that were changed "
                             "since (only files of the names it writes), in --out and as "
                             "--latex / --xlsx; never in another command's folder or an input")
    from ..metrics.families import FAMILIES  # the help names what the registry holds

    parser.add_argument("--compute", default="", metavar="FAMILY,...",
                        help=f"optional metric families to compute as well: "
                             f"{', '.join(FAMILIES)}, or all (default: the standard set only; "
                             f"see the README's Metrics; "
                             f"{', '.join(n for n, f in FAMILIES.items() if f.sequence)}: "
                             f"with --groups, by name, docs/video.md)")
    parser.add_argument("--images", action="append", default=[], metavar="[NAME=]DIR",
                        help="a dataset's RGB images (by GT stem), read by --compute CCM; "
                             "repeat as NAME=DIR per --gt NAME")
    parser.add_argument("--trimaps", action="append", default=[], metavar="[NAME=]DIR",
                        help="a dataset's trimaps (0 / 128 / 255, by GT stem): --compute "
                             "matting then measures their unknown (128) pixels only; repeat as "
                             "NAME=DIR per --gt NAME")
    parser.add_argument("--workers", type=int_in(1), default=None,
                        help="processes measuring images (default: the cores of this process, "
                             "from 64 images on; under torchrun the machine's cores shared "
                             "among its processes); 1 measures in this process")
    _add_ci_arguments(parser)
    parser.add_argument("--curves", type=parse_kinds, default=DEFAULT_KINDS, metavar="KIND,...",
                        help=f"curve plots per dataset, <KIND>.png: {', '.join(KINDS)} or all "
                             f"(default {','.join(DEFAULT_KINDS)}); curves.json holds them all")
    add_table_arguments(parser)
    _add_selection_arguments(parser)


def _add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """``--methods`` and ``--datasets``: the files that name what to evaluate."""
    parser.add_argument("--methods", action="append", default=[], metavar="FILE",
                        type=user_path,
                        help="methods to evaluate: sodkit's YAML/JSON list (name, folder, "
                             "prefix, suffix, per-dataset overrides) or PySODEvalToolkit's "
                             "method JSON; repeatable")
    parser.add_argument("--datasets", metavar="FILE", type=user_path,
                        help="PySODEvalToolkit's dataset JSON: each dataset's mask (GT), image "
                             "and index files, as --gt / --images / --list")


def _add_ci_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ci``, ``--baseline`` and the bootstrap's settings (``evaluation.intervals``)."""
    parser.add_argument("--ci", action="store_true",
                        help="95%% confidence intervals per dataset and metric: a seeded "
                             "bootstrap over images (ci.json, ci.csv, and the printed table)")
    parser.add_argument("--baseline", metavar="NAME",
                        help="with --ci (implied): compare each method with this one, a paired "
                             "bootstrap on the same resampled images (difference, interval, "
                             "p-value)")
    parser.add_argument("--ci-resamples", type=int_in(100, 1_000_000), default=1000,
                        metavar="N", help="bootstrap resamples (default 1000)")
    parser.add_argument("--ci-seed", type=int_in(0), default=0, metavar="N",
                        help="the bootstrap's seed (default 0: the same intervals every run)")


def _add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--include-*`` / ``--exclude-*``, ``--list``, ``--allow-missing``
    (:mod:`sodkit.evaluation.selection`) and ``--groups`` / ``--frames``
    (:mod:`sodkit.evaluation.groups`), under their own heading in ``--help``."""
    from ..include_exclude import names_option

    group = parser.add_argument_group("selection (methods, datasets, images)")
    for kind in ("methods", "datasets"):
        group.add_argument(f"--include-{kind}", type=names_option, metavar="NAME,...",
                           help=f"evaluate only these {kind} (names as in the results)")
        group.add_argument(f"--exclude-{kind}", type=names_option, metavar="NAME,...",
                           help=f"leave these {kind} out")
    group.add_argument("--list", action="append", default=[], metavar="[NAME=]FILE",
                       dest="stem_list",
                       help="evaluate only the GT stems this text file lists (one a line; paths "
                            "and extensions are cut off; '#' starts a comment); repeat as "
                            "NAME=FILE per --gt NAME")
    group.add_argument("--allow-missing", action="store_true",
                       help="evaluate each method on the GT stems it has predictions for (a "
                            "warning gives the counts); a method without a dataset is skipped")
    _add_group_arguments(group)


def frame_range(text: str) -> slice:
    """``START:END`` (either may be empty or negative) -> a slice (argparse type)."""
    start, sep, end = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return slice(int(start) if start.strip() else None, int(end) if end.strip() else None)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected START:END, e.g. 1:-1") from None


def _add_group_arguments(group: Any) -> None:
    """``--groups`` and ``--frames`` (in the selection group of ``sodkit eval --help``)."""
    group.add_argument("--groups", action="store_true",
                       help="each GT folder holds a sub-folder per video or group (VSOD, "
                            "CoSOD), predictions the same: metrics per group, averaged over "
                            "groups")
    group.add_argument("--frames", type=frame_range, metavar="START:END",
                       help="with --groups: the frames of each group kept, by the number their "
                            "names end with (1:-1 skips the first and last)")


def request_of(args: argparse.Namespace) -> EvalRequest:
    """The evaluation the options ask for (its tables printed as they are measured)."""
    from ..evaluation import EvalRequest

    return EvalRequest(
        gt=args.gt, out=args.out, pred=args.pred, method_files=args.methods,
        datasets_file=args.datasets, pred_prefix=args.pred_prefix, pred_suffix=args.pred_suffix,
        include_methods=args.include_methods, exclude_methods=args.exclude_methods,
        include_datasets=args.include_datasets, exclude_datasets=args.exclude_datasets,
        stem_list=args.stem_list, allow_missing=args.allow_missing, groups=args.groups,
        frames=args.frames, compute=args.compute, images=args.images, trimaps=args.trimaps,
        ci=args.ci, baseline=args.baseline, ci_resamples=args.ci_resamples,
        ci_seed=args.ci_seed, force=args.force, curves=args.curves, latex=args.latex,
        latex_style=args.latex_style, latex_ci=args.latex_ci,
        latex_transpose=args.latex_transpose, xlsx=args.xlsx, metrics=args.metrics,
        decimals=args.decimals, workers=args.workers, show=print)


def run(args: argparse.Namespace) -> int:
    from ..evaluation import evaluate_folders

    evaluate_folders(request_of(args))
    return 0
