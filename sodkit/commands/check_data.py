"""``sodkit check-data``: every problem of a recipe's datasets, before hours of training are spent.

Exit code 0: no problem (warnings allowed); 1: problems found; 2: the command or config is wrong.
Without ``--full`` only headers are read (seconds for DUTS-TR); ``--full`` decodes every file,
which also finds truncated and corrupt files and empty or full masks (JPEG images at 1/8 scale:
their pixels are not looked at, so that DIS5K's 8K photos stay fast and bounded).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..argtypes import int_in
from ._common import add_config_arguments, load_cli_config

HELP = "check the recipe's datasets (missing, unpaired, unreadable, mismatched files); exit 1 " \
       "on problems"

SHOWN = 50  # problems listed one per line; the rest are counted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--full", action="store_true",
                        help="decode every file (finds truncated files, empty masks); slower")
    parser.add_argument("--threads", type=int_in(0), default=0,
                        help="decoding threads (default: the number of cores, at most 8)")


def _scan(cfg, where: str) -> tuple[str, list, list]:
    """(name, pairs, issues) of one resolved dataset: folders, listing and pairing problems."""
    from ..data.checks import Issue
    from ..data.pairs import Pair, prepare_dataset
    from ..errors import DataError
    from ..imageio import list_images

    prepare_dataset(cfg)
    root = Path(cfg.root)
    folders = {}
    issues = []
    for key in ("image_dir", "mask_dir"):
        folder = root / getattr(cfg, key)
        try:
            folders[key] = list_images(folder)
        except DataError as exc:
            issues.append(Issue("", folder, f"{where}.{key}: {exc}"))
            continue
        if not folders[key]:
            issues.append(Issue("", folder, f"{where}.{key}: no images in the folder"))
    if len(folders) < 2:
        return cfg.name, [], issues
    images, masks = folders["image_dir"], folders["mask_dir"]
    for stem in sorted(images.keys() - masks.keys()):
        issues.append(Issue(stem, images[stem], f"no mask {stem}.* in {root / cfg.mask_dir}"))
    for stem in sorted(masks.keys() - images.keys()):
        issues.append(Issue(stem, masks[stem], f"no image {stem}.* in {root / cfg.image_dir}"))
    pairs = [Pair(s, images[s], masks[s]) for s in sorted(images.keys() & masks.keys())]
    return cfg.name, pairs, issues


def _check(cfg, where: str, full: bool, threads: int) -> tuple[str, int, list, str]:
    from tqdm import tqdm

    from ..data.checks import check_pairs, output_name_issues
    from ..data.softness import sample_softness

    name, pairs, issues = _scan(cfg, where)
    if where.startswith("data.test."):  # predictions are written under the stems' names
        issues += output_name_issues(pairs)
    if pairs:
        with tqdm(total=len(pairs), desc=f"{where} {name}", unit="pair", disable=None,
                  leave=False) as bar:
            issues += check_pairs(pairs, full=full, threads=threads,
                                  progress=lambda done: bar.update(done - bar.n))
    found = sample_softness([pair.mask for pair in pairs]) if pairs else None
    kind = "-" if found is None or not found.masks else \
        f"{found.kind.split(' ')[0]} ({100 * found.share:.2f}% soft)"
    return name, len(pairs), issues, kind


def run(args: argparse.Namespace) -> int:
    import os

    from ..data.pairs import resolve_dataset
    from ..errors import UserError

    cfg = load_cli_config(args)
    threads = args.threads or max(1, min(8, os.cpu_count() or 1))
    entries = [(f"data.{split}.{i}", d) for split in ("train", "test")
               for i, d in enumerate(getattr(cfg.data, split))]
    if not entries:
        raise UserError(f"{args.config}: no datasets in data.train or data.test")
    rows, problems = [], []
    for where, dataset in entries:
        resolved = resolve_dataset(dataset, cfg.data_root, where=where)
        name, count, issues, kind = _check(resolved, where, args.full, threads)
        errors = [i for i in issues if i.severity == "error"]
        rows.append((where, name, count, len(errors), len(issues) - len(errors), kind))
        problems += [(name, issue) for issue in issues]
    print(_table(rows))
    for name, issue in problems[:SHOWN]:
        print(f"{issue.severity:7s} {name}: {issue.path}: {issue.problem}")
    if len(problems) > SHOWN:
        print(f"... and {len(problems) - SHOWN} more")
    failed = sum(row[3] for row in rows)
    mode = "decoded" if args.full else "headers checked (add --full to decode every file)"
    print(f"\n{failed} problem(s), {sum(row[4] for row in rows)} warning(s); {mode}")
    print("masks: binary, or soft (alpha mattes: >= 1% of pixels in (0.05, 0.95) on average "
          "over 16 sampled masks); soft masks train as they are unless data.binarize is set")
    return 1 if failed else 0


def _table(rows: list[tuple]) -> str:
    header = ("key", "dataset", "pairs", "problems", "warnings", "masks")
    lines = [header, *[tuple(str(v) for v in row) for row in rows]]
    widths = [max(len(line[c]) for line in lines) for c in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True))
                     for line in lines)
