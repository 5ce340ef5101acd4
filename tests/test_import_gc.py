"""``sodkit`` processes import with the cyclic garbage collector off (:mod:`sodkit.import_gc`):
it is off exactly while an import statement runs, back on after (a failed import too), and
what a heavy import made is frozen out of its later passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHECK = """
import gc
from sodkit import import_gc

import_gc.install()
import light
assert not light.ENABLED and gc.isenabled() and gc.get_freeze_count() == 0
try:
    import no_such_module_here
except ImportError:
    pass
assert gc.isenabled()
import heavy
assert not heavy.ENABLED and gc.isenabled() and gc.get_freeze_count() >= 100_000
"""


def test_imports_run_without_the_collector_and_heavy_ones_are_frozen(tmp_path: Path) -> None:
    (tmp_path / "light.py").write_text("import gc\nENABLED = gc.isenabled()\n")
    (tmp_path / "heavy.py").write_text("import gc\nENABLED = gc.isenabled()\n"
                                       "OBJECTS = [[i] for i in range(100_000)]\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", _CHECK], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
