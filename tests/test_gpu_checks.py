"""The CPU-runnable parts of benchmarks/gpu.sh: comparisons that must fail on a difference,
the run check, the RESULTS.md section, and the script's syntax."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_checks  # noqa: E402


def _checkpoint(path: Path, weight: torch.Tensor, rng: list[dict], scale: float | None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    state = {"model": {"w": weight, "n": torch.tensor(3)}, "step": 4, "rng": rng,
             "scaler": {"scale": scale} if scale else {}}
    torch.save(state, path / "last.pt")
    return path / "last.pt"


def test_compare_weights_passes_within_and_fails_beyond_the_tolerance(tmp_path):
    a = _checkpoint(tmp_path / "a", torch.ones(3), [], None)
    b = _checkpoint(tmp_path / "b", torch.ones(3) + 1e-4, [], None)
    assert "ok" in gpu_checks.compare_weights(a, b, 1e-3, "x")
    with pytest.raises(gpu_checks.CheckFailed, match="FAIL"):
        gpu_checks.compare_weights(a, b, 1e-5, "x")
    nan = _checkpoint(tmp_path / "c", torch.tensor([1.0, float("nan"), 1.0]), [], None)
    with pytest.raises(gpu_checks.CheckFailed, match="not finite"):
        gpu_checks.compare_weights(a, nan, 1.0, "x")


def _eval_folder(root: Path, mae: float, png: bytes) -> Path:
    (root / "predictions" / "set").mkdir(parents=True)
    (root / "results.json").write_text(json.dumps({"set": {"MAE": mae, "maxFm": 0.9}}))
    (root / "predictions" / "set" / "a.png").write_bytes(png)
    return root


def test_compare_eval_needs_equal_metrics_and_identical_pngs(tmp_path):
    one = _eval_folder(tmp_path / "one", 0.1, b"png")
    assert "ok" in gpu_checks.compare_eval(one, _eval_folder(tmp_path / "two", 0.1, b"png"),
                                           1e-12, "x")
    with pytest.raises(gpu_checks.CheckFailed, match="0/1 PNGs identical"):
        gpu_checks.compare_eval(one, _eval_folder(tmp_path / "three", 0.1, b"other"), 1e-12, "x")
    with pytest.raises(gpu_checks.CheckFailed, match="max metric diff 1.0e-06"):
        gpu_checks.compare_eval(one, _eval_folder(tmp_path / "four", 0.100001, b"png"), 1e-12,
                                "x")


def test_check_run_wants_the_scaler_state_and_every_ranks_cuda_rng(tmp_path):
    rng = [{"torch": torch.zeros(2, dtype=torch.uint8), "cuda": torch.zeros(2, dtype=torch.uint8)},
           {"torch": torch.zeros(2, dtype=torch.uint8)}]
    _checkpoint(tmp_path / "run" / "checkpoints", torch.ones(2), rng, 1024.0)
    run = tmp_path / "run"
    assert "scale 1024" in gpu_checks.check_run(run, True, 0, "x")
    with pytest.raises(gpu_checks.CheckFailed, match="CUDA RNG states of 1 of 2 ranks"):
        gpu_checks.check_run(run, False, 2, "x")
    _checkpoint(tmp_path / "plain" / "checkpoints", torch.ones(2), rng, None)
    with pytest.raises(gpu_checks.CheckFailed, match="no GradScaler state"):
        gpu_checks.check_run(tmp_path / "plain", True, 0, "x")


def test_write_results_replaces_only_its_own_section(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmarks\n\nkept\n")
    summary = tmp_path / "summary.md"
    summary.write_text("| a | ok | 1 |\n")
    gpu_checks.write_results(summary, results)
    summary.write_text("| b | ok | 2 |\n")
    gpu_checks.write_results(summary, results)
    text = results.read_text()
    assert "kept" in text and "| b | ok | 2 |" in text and "| a |" not in text
    assert text.count(gpu_checks.BEGIN) == 1


def test_a_failed_check_exits_non_zero_and_gpu_sh_parses(tmp_path):
    a = _checkpoint(tmp_path / "a", torch.ones(3), [], None)
    b = _checkpoint(tmp_path / "b", torch.zeros(3), [], None)
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_checks.py"),
                           "compare-weights", str(a), str(b), "--atol", "0.1"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "FAIL" in done.stdout
    assert subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu.sh")]).returncode == 0


def test_birefnet_memory_answers_whether_a_size_fits_24_gb() -> None:
    """gpu.sh section 6's verdict: total peak + 1.5 GiB of CUDA context and allocator slack
    against 24 GiB; an out-of-memory variant is a "no" row, not a failure."""
    import birefnet_memory as bm

    rows = [{"size": 2048, "batch": 2, "variant": "plain", "error": "out of memory"},
            {"size": 2048, "batch": 2, "variant": "bf16+checkpointing", "peak_mb": 9000.0,
             "peak_total_mb": 24 * 1024 - 1536.0, "step_s": 1.0},
            {"size": 1024, "batch": 8, "variant": "plain", "peak_mb": 30000.0,
             "peak_total_mb": 24 * 1024 - 1535.0, "step_s": 1.0}]
    assert [bm.fits(r) for r in rows] == ["no (out of memory)", "yes", "no"]
    assert bm.verdicts(rows) == ["1024 px in 24 GB: no",
                                 "2048 px in 24 GB: yes, bf16+checkpointing at batch 2"]
    table = bm.table(rows)
    assert "| 2048 | 2 | plain | - | - | - | no (out of memory): out of memory |" in table
