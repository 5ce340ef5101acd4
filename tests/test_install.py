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


def test_make_passes_torch_index_and_pip_extra_to_pip(tmp_path: Path) -> None:
    """`make demo TORCH_INDEX=URL` installs torch and torchvision from URL before sodkit (a
    CPU-only torch from the PyTorch CPU wheel index), and PIP_EXTRA reaches every pip install;
    without TORCH_INDEX no other index is asked (a machine that reaches PyPI only installs as
    before). `make -n` prints the commands without running them."""
    venv = tmp_path / "venv"

    def planned(*settings: str) -> str:
        done = subprocess.run(["make", "-n", "demo", f"VENV={venv}", *settings], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    index = "https://download.pytorch.org/whl/cpu"
    plan = planned(f"TORCH_INDEX={index}", "PIP_EXTRA=--no-cache-dir")
    torch_line = next(line for line in plan.splitlines() if "--index-url" in line)
    assert f'--index-url "{index}" "torch>=2.4" "torchvision>=0.19"' in torch_line
    assert "--no-cache-dir" in torch_line
    installs = [line for line in plan.splitlines() if "/pip install" in line]
    assert installs and all("--no-cache-dir" in line for line in installs), installs
    assert plan.index(torch_line) < plan.index(f"{venv}/bin/pip install -q --no-cache-dir -e .")
    default = planned()
    assert 'if [ -n "" ]' in default and f"TORCH_INDEX={index}" in default  # only the hint
