"""``sodkit import-weights FORMAT SOURCE --out FILE.safetensors``: an author's released checkpoint
as a sodkit model file.

The file is read without unpickling code and checked tensor by tensor to be that release
(:mod:`sodkit.published.convert`); the model file holds its weights under sodkit's names, the
published recipe as its config (with the authors' inference pipeline, ``data.preprocess``, so
that ``predict``, ``test`` and the Python API make the masks their code made), and provenance:
the source file's name and sha256, the format and sodkit's version. Formats:
:mod:`sodkit.published` (``minet-r50``, ``f3net-r50``, ``birefnet``: any of its backbones,
recognised from the file).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..argtypes import user_path

if TYPE_CHECKING:
    from ..outputs import OutputFolder

HELP = "convert an author's released checkpoint (minet-r50, f3net-r50, birefnet) into a sodkit " \
       "model file"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..published import format_names

    parser.add_argument("format", metavar="FORMAT", choices=format_names(),
                        help=f"which release: {', '.join(format_names())}")
    parser.add_argument("source", type=user_path, metavar="SOURCE",
                        help="the released file (MINet_Res50.pth, F3Net's model-32, BiRefNet's "
                             "model.safetensors or .pth)")
    parser.add_argument("--out", required=True, type=user_path,
                        help="the model file to write (.safetensors)")
    parser.add_argument("--recipe", type=user_path,
                        help="the published recipe whose config the model file records "
                             "(default: configs/<recipe> of sodkit's source)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing --out file that sodkit did not write, or "
                             "that was changed since")


def check_out(out: Path, source: Path, force: bool) -> OutputFolder:
    """Before any work (a BiRefNet file takes seconds to read and convert): the source is a
    file; ``--out`` a ``.safetensors`` name in an existing folder, not the source, and, as every
    single output file (:func:`sodkit.outputs.single_file`), never in a training run's or
    another command's output folder; an existing file is replaced only when sodkit wrote it and
    nobody changed it since, or with ``--force``."""
    from ..errors import UserError
    from ..model_file import SUFFIX
    from ..outputs import single_file

    if out.suffix.lower() != SUFFIX:
        raise UserError(f"--out {out}: a model file ends in {SUFFIX}, e.g. "
                        f"{out.with_suffix(SUFFIX).name}")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; name the file, e.g. {out / 'model.safetensors'}")
    if not out.parent.is_dir():
        raise UserError(f"--out {out}: the folder {out.parent} does not exist; create it first, "
                        f"or choose another --out")
    if source.is_dir():
        raise UserError(f"{source} is a folder; give the released file itself")
    if not source.is_file():
        raise UserError(f"{source}: file not found")
    return single_file(out, "export", force, "--out", [source])


def run(args: argparse.Namespace) -> int:
    from ..published import get_format

    release = get_format(args.format)
    out, source = Path(args.out), Path(args.source)
    target = check_out(out, source, args.force)  # before torch's import and the long read
    from ..published.convert import import_weights

    import_weights(release, source, out, args.recipe, target=target)
    return 0
