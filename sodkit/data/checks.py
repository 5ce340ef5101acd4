"""Checks of image/mask pairs before hours are spent: fast (headers) or full (decode everything).

The fast check reads each file's header only (Pillow, ~50 us a file): empty files, files that are
no image whatever their extension says, and image/mask size mismatches (after the EXIF
orientation). The full check decodes every file, which also finds truncated and corrupt files,
and warns about masks that are empty or full; a JPEG image is decoded at 1/8 scale (its pixels
are not looked at; libjpeg still reads the whole file), so that 8K photos (DIS5K) stay fast and
bounded. Both run in threads (decoders
release the GIL) and report every problem with the file it concerns; the caller decides what a
problem means (training drops the pair, evaluation refuses, ``sodkit check-data`` lists).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from ..errors import DataError
from ..imageio import decoded_size, header_size, read_mask
from ..mask_encoding import MaskEncodingError, take_notes
from ..text import noun_for, plural
from .pairs import Pair

ERROR, WARNING = "error", "warning"
SAMPLE = 16  # masks decoded for their encoding when only headers are checked


class Issue(NamedTuple):
    """A problem found in a pair: the stem, the file, what is wrong, and how bad it is."""

    stem: str
    path: Path
    problem: str
    severity: str = ERROR


def _mismatch(pair: Pair, image: tuple[int, ...], mask: tuple[int, ...]) -> Issue | None:
    if tuple(image[:2]) == tuple(mask[:2]):
        return None
    return Issue(pair.stem, pair.image, f"image is {image[0]}x{image[1]} (HxW) but its mask "
                 f"{pair.mask.name} is {mask[0]}x{mask[1]}; fix or remove the pair")


def check_pair(pair: Pair, full: bool = False) -> list[Issue]:
    """Every problem of one pair (an empty list when it is fine)."""
    issues: list[Issue] = []
    readers: tuple[Callable, Callable] = (decoded_size, read_mask) if full else (header_size,) * 2
    shapes = []
    for path, reader in zip((pair.image, pair.mask), readers, strict=True):
        try:
            shapes.append(reader(path))
        except DataError as exc:
            issues.append(Issue(pair.stem, path, str(exc)))
    if len(shapes) == 2:
        sizes = [shapes[0], shapes[1].shape if full else shapes[1]]
        mismatch = _mismatch(pair, sizes[0], sizes[1])
        if mismatch is not None:
            issues.append(mismatch)
        elif full:
            issues.extend(_mask_content(pair, shapes[1]))
    return issues


def _mask_content(pair: Pair, mask) -> list[Issue]:
    """Warnings for masks with no salient pixel or nothing but salient pixels (often a mix-up)."""
    salient = int((mask > 128).sum())
    if salient == 0:
        return [Issue(pair.stem, pair.mask, "mask is empty (no pixel > 128)", WARNING)]
    if salient == mask.size:
        return [Issue(pair.stem, pair.mask, "mask is full (every pixel > 128)", WARNING)]
    return []


def output_name_issues(pairs: list[Pair]) -> list[Issue]:
    """Test pairs whose stem cannot name the prediction file written for it (a control
    character such as a tab, an over-long name): found before training, not at its end."""
    from ..paths import name_problem

    issues = []
    for pair in pairs:
        problem = name_problem(f"{pair.stem}.png")
        if problem is not None:
            issues.append(Issue(pair.stem, pair.image, f"its name cannot name a prediction file "
                                f"({problem}); rename the image and its mask"))
    return issues


def check_pairs(pairs: list[Pair], full: bool = True, threads: int = 2,
                progress: Callable[[int], None] | None = None) -> list[Issue]:
    """Issues of every pair, in pair order; ``progress`` gets the count of pairs done.

    Masks stored in another encoding than grey (``sodkit.mask_encoding``: 0/1 label maps,
    16-bit, colour, palette) add one warning per folder and kind, after the pairs' issues: from
    every mask when ``full``, else from :data:`SAMPLE` masks decoded here (headers cannot tell).
    """
    take_notes()  # conversions counted before are not about these pairs
    issues: list[Issue] = []
    with contextlib.closing(_map(lambda p: check_pair(p, full), pairs, threads)) as checked:
        for done, found in enumerate(checked, 1):
            issues.extend(found)
            if progress is not None:
                progress(done)
    looked_at = pairs if full else _sample(pairs)
    if not full:
        with contextlib.closing(_map(_sample_mask, looked_at, threads)) as sampled:
            issues += [issue for found in sampled for issue in found]
    return issues + _encoding_issues(take_notes(), looked_at, sampled=not full)


def _sample(pairs: list[Pair]) -> list[Pair]:
    """:data:`SAMPLE` pairs spread evenly over ``pairs`` (all of them when fewer)."""
    if len(pairs) <= SAMPLE:
        return pairs
    return [pairs[i * (len(pairs) - 1) // (SAMPLE - 1)] for i in range(SAMPLE)]


def _sample_mask(pair: Pair) -> list[Issue]:
    """A sampled mask decoded for its encoding: only a refused encoding is an issue here (a
    truncated file is the full check's to find, as in training)."""
    try:
        read_mask(pair.mask)
    except MaskEncodingError as exc:
        return [Issue(pair.stem, pair.mask, str(exc))]
    except DataError:
        pass
    return []


def _encoding_issues(notes: Counter, pairs: list[Pair], sampled: bool) -> list[Issue]:
    """One warning per mask folder and converted encoding, counting the masks looked at."""
    total = Counter(str(pair.mask.parent) for pair in pairs)
    what = "sampled mask" if sampled else "mask"
    return [Issue("", Path(folder), f"{count} of {plural(total[folder], what)} "
                  f"{noun_for(count, 'is')} {kind}", WARNING)
            for (folder, kind), count in sorted(notes.items())]


def _map(fn: Callable, items: list, threads: int) -> Iterator:
    """``map`` in ``threads``; its caller closes it (an error stops it early: left to the
    garbage collector, the pool's shutdown would join threads from inside a collection)."""
    if threads <= 1 or len(items) < 2:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads) as pool:
        yield from pool.map(fn, items)


def bad_stems(issues: list[Issue]) -> set[str]:
    """Stems with at least one error (warnings do not make a pair bad)."""
    return {issue.stem for issue in issues if issue.severity == ERROR}
