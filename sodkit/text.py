"""Words for counts in messages: ``plural(1, "mask")`` is ``1 mask``, ``plural(2, "mask")``
``2 masks``. Every log line and error that counts something says it through here, so that no
message reads "wrote 1 masks" (#28)."""

from __future__ import annotations

# words whose plural the rules below do not give
_IRREGULAR = {"is": "are", "has": "have", "was": "were", "epoch": "epochs"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"{count} {noun}"`` with the noun in the number ``count`` needs: ``1 mask``, ``0 masks``,
    ``3 worker processes``. ``many`` gives a plural the English rules here do not."""
    return f"{count} {noun_for(count, noun, many)}"


def noun_for(count: int, noun: str, many: str | None = None) -> str:
    """The noun (or verb: ``is`` / ``are``) alone, in the number ``count`` needs; in a noun of
    several words (``worker process``) the last one takes the plural."""
    if count == 1:
        return noun
    if many:
        return many
    head, _, last = noun.rpartition(" ")
    if last in _IRREGULAR:
        last = _IRREGULAR[last]
    elif last.endswith(("s", "x", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u"):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def and_list(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: several things named in one message."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"
