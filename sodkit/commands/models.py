"""``sodkit models``: the models sodkit fetches by name, with their licences and whether each
is cached; ``--fetch NAME ...`` fetches, verifies and converts them now (before a job that
must run offline, or once for every rank of a torchrun job).

The list is :mod:`sodkit.published.catalogue` (built-in, plus ``SODKIT_MODELS``); fetching is
:func:`sodkit.published.fetch.fetch_model`, the same as ``--model NAME`` everywhere.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

HELP = "list the models sodkit fetches by name (licence, size, cached); --fetch NAME fetches"

COLUMNS = ("name", "task", "size", "licence", "commercial", "cached")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--fetch", nargs="+", metavar="NAME",
                        help="fetch, verify and convert these models into the cache now")


def _size(entry: Any, record: dict[str, Any]) -> str:
    size = entry.size or record.get("source_size")
    if not isinstance(size, int):
        return "?"
    return f"{size / 1e6:.0f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB"


def rows() -> list[dict[str, Any]]:
    """One dict per model: the catalogue entry, what the cache holds of it, its record."""
    from ..published.catalogue import entries
    from ..published.fetch import cache_paths, cached, read_record

    out = []
    for entry in entries().values():
        paths = cache_paths(entry)
        record = read_record(paths.record)
        found = cached(entry)
        out.append({**entry.as_dict(), "cached": found is not None,
                    "path": str(paths.model), "size_shown": _size(entry, record),
                    "recorded_sha256": record.get("source_sha256") if record else None})
    return out


def _commercial(value: bool | None) -> str:
    return {True: "yes", False: "no"}.get(value, "?")  # type: ignore[arg-type]


def table(items: list[dict[str, Any]]) -> str:
    """A plain text table (no colours, no box drawing: it pastes into any issue or log)."""
    cells = [[r["name"], r["task"], r["size_shown"], r["licence"], _commercial(r["commercial"]),
              "yes" if r["cached"] else "no"] for r in items]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(COLUMNS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in cells]
    if any(r["size_shown"] == "?" for r in items):
        lines.append("size ?: not published; sodkit records the size and sha256 of the first "
                     "download and checks every later one against them")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.fetch:
        from ..published.fetch import fetch_model

        for name in args.fetch:
            print(f"{name}: {fetch_model(name)}")
        return 0
    items = rows()
    print(json.dumps(items, indent=2) if args.json else table(items))
    return 0
