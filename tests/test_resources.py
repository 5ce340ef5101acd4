"""Default loader workers and compute threads from the core count; worker counts capped by the
work; every input file bounded in the memory it may cost (docs/reliability.md, "Resource limits
and their settings")."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from sodkit.cli import main
from sodkit.config import load_config
from sodkit.resources import (
    WORKERS_PER_CORE,
    available_cores,
    cap_workers,
    default_threads,
    default_workers,
    resolve_workers,
)
from tests import hostile_files
from tests.sod_fixtures import write_duts_layout

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def test_workers_and_threads_share_the_cores() -> None:
    assert [default_workers(c) for c in (1, 2, 3, 4, 8, 32)] == [0, 0, 1, 2, 4, 8]
    for cores in (1, 2, 4, 8, 32):
        assert default_threads(cores) == max(1, cores - default_workers(cores))
    assert resolve_workers(3) == 3 and resolve_workers(None) == default_workers()


def test_local_ranks_split_the_cores(monkeypatch) -> None:
    alone = available_cores()
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert available_cores() == max(1, alone // 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3


def test_config_defaults_are_automatic() -> None:
    cfg = load_config(None, [])
    assert cfg.data.num_workers is None and cfg.runtime.num_threads is None
    assert cfg.data.prefetch_factor == 2 and not cfg.runtime.channels_last


def test_worker_counts_are_capped_by_the_work_and_the_cores(caplog) -> None:
    caplog.set_level(logging.INFO, logger="sodkit")
    cores = available_cores()
    assert cap_workers(200, 5) == min(5, WORKERS_PER_CORE * cores)
    assert cap_workers(200) == WORKERS_PER_CORE * cores and cap_workers(0, 5) == 0
    assert cap_workers(3, 1000) == min(3, WORKERS_PER_CORE * cores)
    assert caplog.text == ""  # no setting named: no line
    cfg = load_config(None, ["data.num_workers=200"])
    from sodkit.data.loaders import _loader_options

    assert _loader_options(cfg, persistent=False)["num_workers"] == WORKERS_PER_CORE * cores
    assert f"data.num_workers 200: using {WORKERS_PER_CORE * cores}" in caplog.text


def test_eval_with_200_workers_for_5_images_starts_at_most_5(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sodkit")
    gt = _masks(tmp_path / "gt", {f"{i}.png": hostile_files.zero_png(8, 8) for i in range(5)})
    pred = _masks(tmp_path / "m", {f"{i}.png": hostile_files.zero_png(8, 8) for i in range(5)})
    assert main(["eval", "--gt", str(gt), "--pred", f"m={pred}", "--out", str(tmp_path / "out"),
                 "--workers", "200"]) == 0
    expected = min(5, WORKERS_PER_CORE * available_cores())
    assert f"--workers 200: using {expected} (at most one per item of work (5)" in caplog.text
    assert f"5 images measured with {expected} worker processes" in caplog.text


# ------------------------------------------------------------------ every input bounded
# Each crafted file is a few MB at most and would cost gigabytes; the command runs in a process
# whose address space may grow by hostile_files.HEADROOM (512 MiB) after its imports, and must
# refuse the file in one line naming it (exit 2) instead of dying of a MemoryError.

def _masks(folder: Path, names: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in names.items():
        (folder / name).write_bytes(data)
    return folder


def _eval_args(tmp_path: Path, gt_name: str, gt: bytes | None) -> list[str]:
    gt_dir = _masks(tmp_path / "gt", {gt_name: gt} if gt is not None else {})
    pred_dir = _masks(tmp_path / "pred", {"a.png": hostile_files.zero_png(4, 4)})
    return ["eval", "--gt", str(gt_dir), "--pred", f"m={pred_dir}", "--out",
            str(tmp_path / "out")]


def _one_error_line(proc, command: str) -> str:
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if f"sodkit {command}: error:" in line]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.mark.parametrize(("case", "gt_name", "needles"), [
    ("inflates to 2 GiB under a 4x4 header", "a.png", ["a.png", "more image data"]),
    ("declares 30000x30000 pixels", "a.png", ["a.png", "900 megapixels", "SODKIT_MAX_PIXELS"]),
    ("a JPEG declaring 30000x30000", "a.jpg", ["a.jpg", "SODKIT_MAX_PIXELS"]),
    ("an 8 GiB sparse file", "a.png", ["a.png", "8192 MiB", "SODKIT_MAX_FILE_MB"]),
])
def test_a_crafted_image_is_refused_within_a_memory_cap(tmp_path, case, gt_name, needles):
    args = _eval_args(tmp_path, gt_name, {
        "inflates to 2 GiB under a 4x4 header": lambda: hostile_files.zero_png(4, 4, 2 << 30),
        "declares 30000x30000 pixels": lambda: hostile_files.zero_png(30000, 30000),
        "a JPEG declaring 30000x30000": lambda: hostile_files.jpeg_claiming(30000, 30000),
        "an 8 GiB sparse file": lambda: None}[case]())
    if case == "an 8 GiB sparse file":
        hostile_files.sparse_file(tmp_path / "gt" / gt_name, 8 << 30)
    assert sum(p.stat().st_blocks for p in tmp_path.rglob("*") if p.is_file()) * 512 < 8 << 20
    proc = hostile_files.run_capped(args, tmp_path, preload=("sodkit.imageio",
                                                             "sodkit.metrics"))
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc, "eval")
    for needle in needles:
        assert needle in line, line


def test_check_data_names_a_sparse_8_gib_mask_within_a_memory_cap(tmp_path):
    """The header check of check-data (and of training's pair filter) read whole files too."""
    root = write_duts_layout(tmp_path / "data", n_train=3, n_test=0)
    mask = root / "DUTS-TR" / "DUTS-TR-Mask" / "sun_tr_001.png"
    hostile_files.sparse_file(mask, 8 << 30)
    proc = hostile_files.run_capped(
        ["check-data", str(ROOT / "configs" / "demo.yaml"), f"data_root={root}",
         "data.train=[{preset: duts-tr}]", "data.test=[]"], tmp_path,
        preload=("sodkit.data", "PIL.Image"))  # no torch: check-data imports none
    assert proc.returncode == 1, proc.stderr  # problems found: listed, not a crash
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    assert "sun_tr_001.png" in proc.stdout and "SODKIT_MAX_FILE_MB" in proc.stdout, proc.stdout


def test_a_billion_laughs_config_is_refused_within_a_memory_cap(tmp_path):
    recipe = tmp_path / "laughs.yaml"
    recipe.write_text(hostile_files.billion_laughs())
    assert recipe.stat().st_size < 1000
    proc = hostile_files.run_capped(["info", str(recipe)], tmp_path)  # refused before torch
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc, "info")
    assert str(recipe) in line and "aliases" in line, line


def test_a_zip_bomb_checkpoint_is_refused_before_torch_reads_it(tmp_path):
    bomb = hostile_files.zip_bomb(tmp_path / "bomb.pt", 2 << 30)
    assert bomb.stat().st_size < 3 << 20
    image = _masks(tmp_path / "in", {"x.png": hostile_files.zero_png(8, 8)}) / "x.png"
    proc = hostile_files.run_capped(["predict", "--checkpoint", str(bomb), "--out",
                                     str(tmp_path / "out"), str(image)], tmp_path,
                                    preload=("torch",))
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc, "predict")
    assert str(bomb) in line and "2048 MiB" in line, line


def test_report_skips_a_zip_bomb_checkpoint_within_a_memory_cap(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({"DS": {
        "Smeasure": 0.5, "wFmeasure": 0.4, "meanEm": 0.6, "maxFm": 0.5, "MAE": 0.1}}))
    hostile_files.zip_bomb(run / "checkpoints" / "bomb.pt", 2 << 30)
    proc = hostile_files.run_capped(["report", str(run), "--out", str(tmp_path / "r.html")],
                                    tmp_path, preload=("sodkit.report.html",))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr, proc.stderr
    assert "bomb.pt" in proc.stderr and "2048 MiB" in proc.stderr, proc.stderr
    assert (tmp_path / "r.html").is_file()


def test_report_skips_an_event_file_whose_record_claims_8_gib(trained, tmp_path):
    """TensorBoard's reader allocates what a record's length field says: a 28-byte event file
    claiming an 8 GiB record ended `sodkit report` in a MemoryError. It is skipped with a
    warning naming it, and the run's own curves are read as before."""
    import shutil
    import struct

    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from sodkit.report.training import training_scalars

    run = tmp_path / "run"
    shutil.copytree(trained, run)
    header = struct.pack("<Q", 8 << 30)
    bad = run / "tb" / "events.out.tfevents.9999999999.crafted"
    bad.write_bytes(header + struct.pack("<I", masked_crc32c(header)) + bytes(12))
    proc = hostile_files.run_capped(
        ["report", str(run), "--out", str(tmp_path / "r.html")], tmp_path,
        preload=("sodkit.report.html",
                 "tensorboard.backend.event_processing.event_accumulator"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{bad.name}: the record at byte 0 claims 8589934592 bytes, skipped" in proc.stderr, \
        proc.stderr
    assert "Traceback" not in proc.stderr
    assert training_scalars(run) == training_scalars(trained)  # the good files, file by file


@pytest.mark.parametrize("name", ["results.json", "results_per_image.csv", "train.log"])
def test_report_refuses_a_sparse_8_gib_result_file_within_a_memory_cap(tmp_path, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"DS": {
        "Smeasure": 0.5, "wFmeasure": 0.4, "meanEm": 0.6, "maxFm": 0.5, "MAE": 0.1}}))
    hostile_files.sparse_file(run / name, 8 << 30, head=b"")
    proc = hostile_files.run_capped(["report", str(run), "--out", str(tmp_path / "r.html")],
                                    tmp_path, preload=("sodkit.report.html",))
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc, "report")
    assert str(run / name) in line and "8192 MiB" in line and "SODKIT_MAX_FILE_MB" in line, line


# ------------------------------------------------- YAML, and the config inside a checkpoint
@pytest.mark.parametrize(("text", "needle"), [
    (hostile_files.billion_laughs(), "expand it to 1234567915 values"),
    ("model:\n  backbone_kwargs: &loop {inner: *loop}\n", "refers to the node that holds it"),
    ("model:\n  backbone_kwargs: {x: " + "[" * 3000 + "]" * 3000 + "}\n", "nested too deeply"),
    ("model:\n  backbone_kwargs: {x: [" + "0, " * 100_001 + "]}\n", "more than 100000 values"),
])
def test_yaml_that_would_expand_without_bound_is_refused(tmp_path, text, needle):
    """Every YAML sodkit reads (recipes, overrides, --methods files, a run's config.yaml in a
    report) goes through one bounded loader; a refusal is a config error naming the file. The
    billion laughs also runs under a memory cap above."""
    from sodkit.config import ConfigError, load_config

    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    with pytest.raises(ConfigError, match=needle) as info:
        load_config(recipe)
    assert str(recipe) in str(info.value) and "\n" not in str(info.value)


def test_yaml_anchors_of_a_real_recipe_still_load(tmp_path):
    from sodkit.config import ConfigError, load_config

    recipe = tmp_path / "anchors.yaml"
    recipe.write_text("data:\n  mean: &m [0.5, 0.5, 0.5]\n  std: *m\n  size: &s 64\n"
                      "  size_list: [*s, 96]\n")
    cfg = load_config(recipe)
    assert cfg.data.std == [0.5, 0.5, 0.5] and cfg.data.size_list == [64, 96]
    recipe.write_text("# padding\n" * 110_000)  # 1.05 MB of comments: over the size bound
    with pytest.raises(ConfigError, match="more than the 1 MiB a YAML file may have"):
        load_config(recipe)


def test_a_billion_laughs_override_is_refused(tmp_path, capsys):
    levels = ", ".join(f"k{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9))
    override = f"model.backbone_kwargs={{k0: &a0 lol, {levels}}}"
    assert len(override) < 700
    assert main(["info", str(DEMO), override]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sodkit info: error: override") and "aliases" in err, err[:300]
    assert len(err.splitlines()) == 1


# ----------------------------------------------------------- a checkpoint's config is input
def _with_config(trained: Path, tmp_path: Path, edit) -> Path:
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    edit(state)
    path = tmp_path / "edited.pt"
    torch.save(state, path)
    return path


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda s: s["config"]["data"].update(size=60000), "data.size: must be in [16, 4096]"),
    (lambda s: s["config"]["data"].update(std=[0.2, 0.0, 0.2]), "data.std"),
    (lambda s: s["config"]["train"].update(epohcs=3), "unknown config key 'train.epohcs'"),
    (lambda s: s.pop("config"), "expected a mapping"),
])
@pytest.mark.parametrize("command", ["predict", "export"])
def test_a_checkpoint_s_stored_config_is_checked_like_a_recipe(trained, tmp_path, capsys,
                                                               edit, needle, command):
    """predict and export build the network from the config inside the checkpoint: it is
    checked as a recipe is, and an error names the checkpoint and the key, before any work."""
    checkpoint = _with_config(trained, tmp_path, edit)
    image = tmp_path / "x.png"
    image.write_bytes(hostile_files.zero_png(40, 40))
    args = {"predict": ["predict", "--checkpoint", str(checkpoint), "--out",
                        str(tmp_path / "out"), str(image)],
            "export": ["export", "--checkpoint", str(checkpoint), "--onnx",
                       str(tmp_path / "m.onnx")]}[command]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert str(checkpoint) in err and "stored in it is invalid" in err and needle in err, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.onnx").exists()


def test_an_input_side_beyond_the_bound_is_refused_before_any_work(trained, tmp_path, capsys):
    checkpoint = str(trained / "checkpoints" / "last.pt")
    image = tmp_path / "x.png"
    image.write_bytes(hostile_files.zero_png(40, 40))
    with pytest.raises(SystemExit) as exit_:  # a usage error, from the option's type
        main(["predict", "--checkpoint", checkpoint, "--out", str(tmp_path / "out"), str(image),
              "--size", "60000"])
    assert exit_.value.code == 2
    assert "--size: must be in [16, 4096], got 60000" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["export", "--checkpoint", checkpoint, "--onnx", str(tmp_path / "m.onnx"),
              "--size", "64", "9000"])
    assert exit_.value.code == 2
    assert "--size: must be in [32, 4096], got 9000" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.onnx").exists()
