"""The models sodkit knows by name: the authors' releases (``catalogue.yaml`` in this package)
and a team's own (``SODKIT_MODELS=FILE.yaml``), as validated :class:`Entry` records.

Both files have one form (the comment at the top of ``catalogue.yaml``). A team's file is
input from elsewhere, read as hostile: bounded like every YAML file (1 MiB, aliases counted),
every key known and typed, names that may become file names checked, URLs http(s) only and
without credentials, every text free of control characters; a team's entry must give its
sha256 (you have the file: ``sha256sum FILE``). ``SODKIT_MIRROR=URL`` replaces the scheme and
host of every entry's URL, the path kept (a company mirror of huggingface.co, GitHub and
Google Drive).

Light: no torch (``sodkit models`` lists without it).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import UserError

BUILT_IN = Path(__file__).with_name("catalogue.yaml")
TEAM_ENV, MIRROR_ENV = "SODKIT_MODELS", "SODKIT_MIRROR"
SODKIT_FORMAT = "sodkit"  # a sodkit model file: cached as it is, nothing converted
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_ENTRIES, MAX_TEXT, MAX_URL, MAX_BYTES = 1000, 500, 2048, 1 << 40
_TEXT = ("title", "task", "licence", "licence_note", "paper", "sha256_note", "backbone")
_KEYS = {"name", "format", "url", "file", "size", "sha256", "page", "recipe", "inference",
         "commercial", "params", *_TEXT}
_REQUIRED = ("name", "title", "task", "format", "licence")


@dataclass(frozen=True)
class Entry:
    """One model sodkit fetches by name."""

    name: str
    title: str
    task: str
    format: str  # an import-weights format, or "sodkit"
    url: str | None  # None: only a page (the authors publish it behind one)
    file: str  # the released file's name
    size: int | None
    sha256: str | None
    licence: str
    origin: str  # "built-in" or the team file's path
    sha256_note: str | None = None
    page: str | None = None
    recipe: str | None = None  # a file name under configs/
    inference: dict[str, Any] = field(default_factory=dict)  # size, preprocess
    commercial: bool | None = None
    licence_note: str | None = None
    paper: str | None = None
    backbone: str | None = None
    params: int | None = None
    original_url: str | None = None  # before SODKIT_MIRROR

    def as_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.__dataclass_fields__}


def _problem(where: str, message: str) -> UserError:
    return UserError(f"{where}: {message}")


def _text(value: Any, key: str, where: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _problem(where, f"{key} must be a non-empty text")
    if len(value) > limit or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _problem(where, f"{key} is longer than {limit} characters or holds a control "
                              f"character")
    return value


def _url(value: Any, key: str, where: str) -> str:
    text = _text(value, key, where, MAX_URL)
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _problem(where, f"{key} {text!r} must be an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise _problem(where, f"{key} must not carry a user name or password (they would be "
                              f"logged); use SODKIT_MIRROR or your proxy's settings")
    return text


def _count(value: Any, key: str, where: str, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= high:
        raise _problem(where, f"{key} must be a whole number in [1, {high}] or null, got "
                              f"{value!r}")
    return value


def _file_name(value: Any, key: str, where: str) -> str:
    from ..paths import name_problem

    text = _text(value, key, where, 255)
    problem = name_problem(text)
    if problem is not None:
        raise _problem(where, f"{key} {text!r} is not a file name ({problem})")
    return text


def _inference(value: Any, where: str) -> dict[str, Any]:
    from ..config.schema import MAX_SIZE, MIN_SIZE

    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - {"size", "preprocess"}:
        raise _problem(where, "inference must be a mapping of size and preprocess")
    out: dict[str, Any] = {}
    if value.get("size") is not None:
        size = _count(value["size"], "inference.size", where, MAX_SIZE)
        if size is not None and size < MIN_SIZE:
            raise _problem(where, f"inference.size must be at least {MIN_SIZE}")
        out["size"] = size
    if value.get("preprocess") is not None:
        text = _text(value["preprocess"], "inference.preprocess", where, 40)
        if not NAME.fullmatch(text):
            raise _problem(where, f"inference.preprocess {text!r} is not a pipeline name")
        out["preprocess"] = text
    return out


def parse_entry(raw: Any, origin: str, index: int) -> Entry:
    """One entry of a catalogue file, checked key by key; ``origin`` names the file."""
    from .formats import format_names

    where = f"{origin}: models.{index}"
    if not isinstance(raw, dict):
        raise _problem(where, "each entry must be a mapping of keys (name, url, sha256, ...)")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(_KEYS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise _problem(where, f"unknown key {unknown[0]!r}{hint} (known: "
                              f"{', '.join(sorted(_KEYS))})")
    missing = [k for k in _REQUIRED if raw.get(k) is None]
    if missing:
        raise _problem(where, f"{missing[0]} is missing")
    name = _text(raw["name"], "name", where, 64)
    if not NAME.fullmatch(name):
        raise _problem(where, f"name {name!r}: use lower case letters, digits, '-', '_' and "
                              f"'.', starting with a letter or digit, at most 64 characters")
    where = f"{origin}: model {name!r}"
    formats = [*format_names(), SODKIT_FORMAT]
    if raw["format"] not in formats:
        raise _problem(where, f"format {raw['format']!r} is not one of {', '.join(formats)}")
    url = None if raw.get("url") is None else _url(raw["url"], "url", where)
    page = None if raw.get("page") is None else _url(raw["page"], "page", where)
    if url is None and page is None:
        raise _problem(where, "give url (the file) or at least page (where it is published)")
    file = raw.get("file")
    if file is None:
        if url is None:
            raise _problem(where, "file (the released file's name) is needed when url is null")
        file = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    sha = raw.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not SHA256.fullmatch(sha.lower())):
        raise _problem(where, "sha256 must be 64 hexadecimal digits or null")
    commercial = raw.get("commercial")
    if commercial is not None and not isinstance(commercial, bool):
        raise _problem(where, "commercial must be true, false or null")
    texts = {k: _text(raw[k], k, where) for k in _TEXT if raw.get(k) is not None}
    return Entry(
        name=name, format=raw["format"], url=url, file=_file_name(file, "file", where),
        size=_count(raw.get("size"), "size", where, MAX_BYTES), origin=origin,
        sha256=sha.lower() if sha else None, page=page, commercial=commercial,
        recipe=None if raw.get("recipe") is None else _file_name(raw["recipe"], "recipe", where),
        inference=_inference(raw.get("inference"), where),
        params=_count(raw.get("params"), "params", where, MAX_BYTES), **texts)


def parse_catalogue(path: Path, origin: str) -> list[Entry]:
    """The entries of one catalogue file (built-in or a team's), each checked."""
    from ..config.yamlio import read_yaml

    data = read_yaml(path)
    if not isinstance(data, dict) or set(data) - {"version", "templates", "models"}:
        raise UserError(f"{origin}: the top level must be a mapping of version, templates "
                        f"(optional) and models (a list of entries)")
    if data.get("version", 1) != 1:
        raise UserError(f"{origin}: version {data.get('version')!r}: this sodkit reads version 1")
    models = data.get("models")
    if not isinstance(models, list) or len(models) > MAX_ENTRIES:
        raise UserError(f"{origin}: models must be a list of at most {MAX_ENTRIES} entries")
    entries = [parse_entry(raw, origin, i) for i, raw in enumerate(models)]
    seen: set[str] = set()
    for entry in entries:
        if entry.name in seen:
            raise UserError(f"{origin}: model {entry.name!r} is listed twice")
        seen.add(entry.name)
    return entries


def mirrored(url: str | None, mirror: str | None) -> str | None:
    """``url`` with the scheme and host of ``mirror`` (and its path as a prefix), the rest kept."""
    if url is None or not mirror:
        return url
    base, parts = urlsplit(mirror), urlsplit(url)
    return urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + parts.path,
                       parts.query, ""))


def mirror_setting() -> str | None:
    """``SODKIT_MIRROR``, checked; None when unset."""
    text = os.environ.get(MIRROR_ENV, "").strip()
    if not text:
        return None
    try:
        return _url(text, MIRROR_ENV, MIRROR_ENV)
    except UserError as exc:
        raise UserError(f"{exc}, e.g. {MIRROR_ENV}=https://mirror.example.com") from None


def _team_entries() -> list[Entry]:
    text = os.environ.get(TEAM_ENV, "").strip()
    if not text:
        return []
    path = Path(text).expanduser()
    if not path.is_file():
        raise UserError(f"{TEAM_ENV}={text}: no such file (a YAML list of models, the form "
                        f"of sodkit/published/catalogue.yaml)")
    entries = parse_catalogue(path, f"{TEAM_ENV} {path}")
    for entry in entries:
        if entry.sha256 is None:
            raise UserError(f"{TEAM_ENV} {path}: model {entry.name!r} has no sha256: a team's "
                            f"own file is known, so give it (sha256sum FILE)")
    return entries


def entries() -> dict[str, Entry]:
    """Every model by name: the built-in ones, then a team's (which may not reuse a name), their
    URLs through ``SODKIT_MIRROR``."""
    built_in = parse_catalogue(BUILT_IN, "built-in catalogue")
    known = {entry.name: entry for entry in built_in}
    for entry in _team_entries():
        if entry.name in known:
            raise UserError(f"{entry.origin}: model {entry.name!r} is a built-in name; choose "
                            f"another (e.g. team-{entry.name})")
        known[entry.name] = entry
    mirror = mirror_setting()
    return {name: _with_url(entry, mirror) for name, entry in known.items()}


def _with_url(entry: Entry, mirror: str | None) -> Entry:
    from dataclasses import replace

    return replace(entry, url=mirrored(entry.url, mirror), original_url=entry.url)


def looks_like_name(text: str) -> bool:
    """Whether ``text`` could be a model name (and so is not meant as a path)."""
    return bool(NAME.fullmatch(text)) and not text.endswith((".safetensors", ".pt", ".pth",
                                                            ".yaml", ".yml"))


def get_entry(name: str) -> Entry:
    """The model called ``name``; an unknown name is one line with the closest known one."""
    known = entries()
    if name not in known:
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UserError(f"unknown model {name!r}{hint} (sodkit models lists the {len(known)} "
                        f"known; {TEAM_ENV}=FILE.yaml adds your own)")
    return known[name]
