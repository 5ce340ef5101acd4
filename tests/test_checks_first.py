"""Names and paths are checked before the work (#32 item 4): a missing output folder, a missing
or misnamed input, an output where it may not go are one line before torch is even imported
(`import-weights --out missing/dir/m.safetensors` failed after 9 s of conversion, `bench
--json missing/x.json` after every variant had run).

Each command runs in a fresh process whose `torch` cannot be imported (a stand-in package on
the path raises): a command that checks first ends in its own one-line error; one that starts
the work first ends in the stand-in's ImportError.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DEMO = ROOT / "configs" / "demo.yaml"


@pytest.fixture(scope="module")
def no_torch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("no_torch")
    for name in ("torch", "torchvision", "timm"):
        (folder / name).mkdir()
        (folder / name / "__init__.py").write_text(
            f"raise ImportError('{name} imported before the names were checked')\n")
    return folder


def run_without_torch(no_torch: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "sodkit", *args], cwd=ROOT,
                          env={"PYTHONPATH": f"{no_torch}:{ROOT}", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    return lines[0]


CASES = {  # name -> (arguments with {t} for the test's folder, words of the error line)
    "import-weights --out in a missing folder": (
        ["import-weights", "f3net-r50", "{t}/model-32", "--out", "{t}/missing/m.safetensors"],
        "does not exist"),
    "import-weights of a missing file": (
        ["import-weights", "f3net-r50", "{t}/no.pth", "--out", "{t}/m.safetensors"],
        "file not found"),
    "export of a missing checkpoint": (
        ["export", "--checkpoint", "{t}/no.pt", "--onnx", "{t}/m.onnx"], "file not found"),
    "export --onnx in a missing folder": (
        ["export", "--checkpoint", "{t}/last.pt", "--onnx", "{t}/missing/m.onnx"],
        "does not exist"),
    "export --model in a missing folder": (
        ["export", "--checkpoint", "{t}/last.pt", "--model", "{t}/missing/m.safetensors"],
        "does not exist"),
    "test of a missing checkpoint": (
        ["test", str(DEMO), "--checkpoint", "{t}/no.pt"], "file not found"),
    "test without test sets": (
        ["test", str(DEMO), "data.test=[]", "--checkpoint", "{t}/last.pt"], "data.test is empty"),
    "train --resume of a missing file": (
        ["train", str(DEMO), "output_root={t}", "--resume", "{t}/no.pt"], "file not found"),
    "train with a missing model.pretrained": (
        ["train", str(DEMO), "output_root={t}", "model.pretrained=/no/weights.pth"],
        "model.pretrained: file not found"),
    "train with a folder as model.init_from": (
        ["train", str(DEMO), "output_root={t}", "model.init_from={t}"], "is a folder"),
    "bench --json in a missing folder": (
        ["bench", "memory", str(DEMO), "--json", "{t}/missing/rows.json"], "does not exist"),
    "bench with a missing model.init_from": (
        ["bench", "speed", str(DEMO), "model.init_from=/no/m.safetensors"], "file not found"),
    "convert-checkpoint of a missing second file": (
        ["convert-checkpoint", "{t}/last.pt", "{t}/no.pt"], "file not found"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_names_and_paths_are_checked_before_torch_is_imported(no_torch, tmp_path, case):
    args, words = CASES[case]
    for name in ("last.pt", "model-32"):
        (tmp_path / name).write_bytes(b"never read")
    line = run_without_torch(no_torch, *(a.replace("{t}", str(tmp_path)) for a in args))
    assert words in line and "imported before" not in line, line
    assert (tmp_path / "last.pt").read_bytes() == b"never read"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt", "model-32"]
