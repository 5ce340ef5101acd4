"""How to install an optional extra, said right for this installation.

A hint of ``pip install 'sodkit[report]'`` is wrong in a clone installed with ``pip install
-e .`` (it would fetch another sodkit from an index), and ``pip install -e '.[report]'`` is
wrong for a wheel. Where the package is imported from says which it is: a clone's package
folder sits beside its ``pyproject.toml`` (an editable install imports it from there), a wheel's
in ``site-packages``. (The distribution's metadata cannot tell: run from the clone, Python finds
the clone's own ``sodkit.egg-info`` first, which has no ``direct_url.json``.) Light imports.
"""

from __future__ import annotations

import os
from pathlib import Path


def clone_folder(package_root: Path | None = None) -> Path | None:
    """The clone sodkit is imported from (None: an installed wheel). ``package_root``: the
    folder above the ``sodkit`` package (default: this one's)."""
    root = Path(__file__).resolve().parents[1] if package_root is None else Path(package_root)
    if (root / "pyproject.toml").is_file() and "site-packages" not in root.parts:
        return root
    return None


def install_hint(extra: str, package_root: Path | None = None) -> str:
    """The command that installs sodkit's ``extra`` here: ``pip install -e '<clone>[extra]'``
    (``.`` when the clone is the working folder) for a clone, else ``pip install
    'sodkit[extra]'``."""
    clone = clone_folder(package_root)
    if clone is None:
        return f"pip install 'sodkit[{extra}]'"
    shown = "." if clone == Path(os.getcwd()).resolve() else str(clone)
    return f"pip install -e '{shown}[{extra}]'"
