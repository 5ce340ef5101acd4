"""Installing sodkit as the README says (`pip install -e .` in the clone) is quiet (#28).

setuptools' editable build of a flat-layout package used an import finder and printed an
11-line `BuildBackendWarning` ("Please be careful with folders in your working directory with
the same name as your package") on every install; `package-dir = {"" = "."}` in pyproject.toml
makes it a plain .pth entry for the clone. The backend is run here the way pip runs it, on a
copy of the package's files (nothing is written into the clone), without a download."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_prints_no_backend_warning(tmp_path: Path) -> None:
    project = tmp_path / "clone"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "sodkit", project / "sodkit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (project / "tests").mkdir()  # a folder beside the package, as in the clone
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build = ("import setuptools.build_meta as backend, sys; "
             "print(backend.build_editable(sys.argv[1]))")
    done = subprocess.run([sys.executable, "-W", "default", "-c", build, str(wheels)],
                          cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "careful with folders" not in output, output
    assert "BuildBackendWarning" not in output and "InformationOnly" not in output, output
    wheel = wheels / done.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        pth = [n for n in archive.namelist() if n.endswith(".pth")]
        assert len(pth) == 1, archive.namelist()
        assert archive.read(pth[0]).decode().strip() == str(project.resolve())
