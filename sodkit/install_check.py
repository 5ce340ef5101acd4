"""``python -m sodkit.install_check``: after ``make``'s install, torch and torchvision work
together, or one message says what to do (#33 item 9).

torch and torchvision are built for each other, release by release: from two indexes (the
PyTorch CPU index for one, PyPI for the other, as when ``make demo TORCH_INDEX=...`` could not
reach its index halfway) they import, but torchvision's compiled operators are not registered,
and the first command ended in ``RuntimeError: operator torchvision::nms does not exist``. The
Makefile runs this module last; a failure stops ``make`` before ``.installed`` is written, so
the next ``make`` installs again.
"""

from __future__ import annotations

import sys

FIX = ("reinstall both from one index: rm -rf .venv && make demo "
       "TORCH_INDEX=https://download.pytorch.org/whl/cpu (a CPU-only torch), or rm -rf .venv && "
       "make demo (PyPI's); where that index cannot be reached, add a mirror with "
       "PIP_EXTRA=\"--index-url URL\"")


def problem() -> str | None:
    """Why torch and torchvision do not work together here, or None when they do."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any failure of the install is the answer
        return f"torch does not import ({type(exc).__name__}: {_first(exc)})"
    try:
        import torchvision
        from torchvision.ops import nms

        nms(torch.zeros((1, 4)), torch.zeros(1), 0.5)  # a compiled operator of torchvision
    except Exception as exc:  # noqa: BLE001
        version = getattr(sys.modules.get("torchvision"), "__version__", "?")
        return (f"torchvision {version} does not work with torch {torch.__version__} "
                f"({type(exc).__name__}: {_first(exc)})")
    del torchvision
    return None


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "no message"


def main() -> int:
    found = problem()
    if found is None:
        return 0
    print(f"sodkit install: {found}; {FIX}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
