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

from ..argtypes import user_path

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
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")


def check_out(out: Path, source: Path, force: bool) -> None:
    """Before any work: a ``.safetensors`` file that is not the source and not a folder, new
    unless ``--force``."""
    from ..errors import UserError
    from ..model_file import SUFFIX

    if out.suffix.lower() != SUFFIX:
        raise UserError(f"--out {out}: a model file ends in {SUFFIX}, e.g. "
                        f"{out.with_suffix(SUFFIX).name}")
    if out.is_dir():
        raise UserError(f"--out {out} is a folder; name the file, e.g. {out / 'model.safetensors'}")
    if source.exists() and out.exists() and out.resolve() == source.resolve():
        raise UserError(f"--out {out} is the source file; write the model file elsewhere")
    if out.exists() and not force:
        raise UserError(f"{out} exists already; pass --force to replace it, or choose another "
                        f"--out")


def run(args: argparse.Namespace) -> int:
    from ..published import get_format
    from ..published.convert import import_weights

    release = get_format(args.format)
    out, source = Path(args.out), Path(args.source)
    check_out(out, source, args.force)
    import_weights(release, source, out, args.recipe)
    return 0
