"""sodkit never deletes, overwrites or unpickles what it did not create (docs/reliability.md).

Real processes in real folders: each test builds the user's files, runs the command the way a
user would, and then checks every byte the user had is still there.
"""

from __future__ import annotations

import builtins
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.outputs import MARKER
from sodkit.paths import check_name, inside, name_problem
from sodkit.torchfile import load_checkpoint, numpy_state, plain_numpy_state
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "demo.yaml"


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """A user's working folder: a precious file, a recipe and an output folder with a run."""
    (tmp_path / "precious.txt").write_text("years of work\n")
    shutil.copy(DEMO, tmp_path / "demo.yaml")
    (tmp_path / "output" / "old").mkdir(parents=True)
    (tmp_path / "output" / "old" / "notes.md").write_text("keep me\n")
    return tmp_path


# ---------------------------------------------------------------- names are names
@pytest.mark.parametrize("name", ["..", ".", "/tmp/x", "a/b", "a\\b", "C:evil", ""])
def test_a_bad_run_name_with_overwrite_deletes_nothing(user_folder, name, run_cli):
    before = snapshot(user_folder)
    proc = run_cli("train", "demo.yaml", f"name={name}", "--overwrite", cwd=user_folder)
    assert proc.returncode == 2, proc.stderr
    assert "name:" in proc.stderr and "not a valid name" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(user_folder) == before
    assert not Path("/tmp/x/.sodkit-run").exists()


def test_a_dataset_named_up_the_tree_is_refused(user_folder, run_cli):
    before = snapshot(user_folder)
    proc = run_cli("test", "demo.yaml",
                   "data.test=[{name: ../up, root: data, image_dir: i, mask_dir: m}]",
                   "--checkpoint", "none.pt", cwd=user_folder)
    assert proc.returncode == 2
    assert "data.test.0.name" in proc.stderr and "'../up'" in proc.stderr
    assert snapshot(user_folder) == before


def test_a_dataset_name_derived_from_its_root_is_checked(tmp_path):
    from sodkit.config import ConfigError
    from sodkit.config.schema import DatasetCfg
    from sodkit.data.pairs import resolve_dataset

    cfg = DatasetCfg(root="/", image_dir="i", mask_dir="m")  # the root's name is empty
    with pytest.raises(ConfigError, match=r"data\.test\.3\.name"):
        resolve_dataset(cfg, str(tmp_path), where="data.test.3")


def test_eval_refuses_a_method_name_that_is_a_path(tmp_path, run_cli):
    gt = tmp_path / "gt"
    gt.mkdir()
    proc = run_cli("eval", "--gt", str(gt), "--pred", f"../x={gt}", "--out", "res", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--pred" in proc.stderr and "'../x'" in proc.stderr
    assert not (tmp_path / "res").exists()


def test_name_rules():
    for good in ["demo", "DUTS-TE", "run 1", "ünïcode", "a.b", "-x"]:
        assert name_problem(good) is None, good
    for bad in ["", ".", "..", "a/b", "/abs", "a\\b", "D:", "tab\there", "x" * 256]:
        assert name_problem(bad) is not None, bad
    assert check_name("ok", "name") == "ok"


def test_inside_refuses_a_symbolic_link_out_of_its_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out" / "ds").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match="outside"):
        inside(tmp_path / "out", "ds", "x.png")
    with pytest.raises(UserError, match="not a single"):
        inside(tmp_path / "out", "..", "x.png")
    assert inside(tmp_path / "out", "a", "x.png") == tmp_path / "out" / "a" / "x.png"


# ---------------------------------------------------------------- --overwrite
def test_overwrite_keeps_a_folder_without_the_marker(data_root, tmp_path):
    victim = tmp_path / "mine"
    victim.mkdir()
    (victim / "thesis.tex").write_text("do not delete\n")
    code = main(["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "mine"), "--overwrite"])
    assert code == 2
    assert (victim / "thesis.tex").read_text() == "do not delete\n"


def test_overwrite_replaces_a_sodkit_run_folder(data_root, tmp_path):
    """A run folder marked by hand (sodkit 0.1) holds no record: its working files (logs,
    events, checkpoints) are the run's and go; any other file would be the user's
    (tests/test_unrecorded_files.py)."""
    run = tmp_path / "again"
    (run / "tb").mkdir(parents=True)
    (run / MARKER).write_text("{}\n")
    (run / "tb" / "events.stale").write_text("from the earlier run\n")
    (run / "train.log").write_text("from the earlier run\n")
    overrides = tiny_overrides(data_root, tmp_path, "again", epochs=1) + [
        "data.test=[]", "train.steps_per_epoch=1"]
    assert main(["train", str(DEMO), *overrides, "--overwrite"]) == 0
    assert not (run / "tb" / "events.stale").exists()
    assert "from the earlier run" not in (run / "train.log").read_text()
    assert (run / "checkpoints" / "last.pt").is_file() and (run / MARKER).is_file()


def test_training_into_a_user_folder_is_refused(data_root, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "config.yaml").write_text("mine\n")
    assert main(["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "docs")]) == 2
    assert snapshot(folder) == {"config.yaml": b"mine\n"}


# ---------------------------------------------------------------- inputs are never outputs
def test_predict_into_its_own_input_folder_is_refused(trained, tmp_path, run_cli):
    from PIL import Image

    pin = tmp_path / "pin"
    pin.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)).save(pin / f"{i}.png")
    before = snapshot(pin)
    ckpt = str(trained / "checkpoints" / "last.pt")
    proc = run_cli("predict", "--checkpoint", ckpt, "--out", "pin", "pin", cwd=tmp_path)
    assert proc.returncode == 2 and "holds the input" in proc.stderr
    assert snapshot(pin) == before
    parent = run_cli("predict", "--checkpoint", ckpt, "--out", ".", "pin/0.png", cwd=tmp_path)
    assert parent.returncode == 2 and snapshot(pin) == before
    (tmp_path / "file.txt").write_bytes(b"x")
    as_file = run_cli("predict", "--checkpoint", ckpt, "--out", "file.txt", "pin", cwd=tmp_path)
    assert as_file.returncode == 2 and "is a file" in as_file.stderr
    (tmp_path / "file.png").write_bytes(b"x")  # an image name: the output file of one image
    as_file = run_cli("predict", "--checkpoint", ckpt, "--out", "file.png", "pin", cwd=tmp_path)
    assert as_file.returncode == 2 and "names one file, but 3 images" in as_file.stderr
    mine = run_cli("predict", "--checkpoint", ckpt, "--out", "file.png", "pin/0.png",
                   cwd=tmp_path)
    assert mine.returncode == 2 and "was not written by sodkit" in mine.stderr
    assert (tmp_path / "file.png").read_bytes() == b"x"


def test_predict_never_replaces_a_file_without_force(trained, tmp_path):
    from PIL import Image

    (tmp_path / "in").mkdir()
    Image.fromarray(np.full((30, 30, 3), 90, np.uint8)).save(tmp_path / "in" / "cat.jpg")
    out = tmp_path / "masks"
    out.mkdir()
    (out / "cat.png").write_bytes(b"the user's own mask")
    (out / "readme.txt").write_text("mine\n")
    args = ["predict", "--checkpoint", str(trained / "checkpoints" / "last.pt"),
            "--out", str(out), "--workers", "0", str(tmp_path / "in")]
    assert main(args) == 2
    assert (out / "cat.png").read_bytes() == b"the user's own mask"
    assert main([*args, "--force"]) == 0
    assert (out / "cat.png").read_bytes()[:4] == b"\x89PNG"  # replaced: a name it writes
    assert (out / "readme.txt").read_text() == "mine\n"  # untouched: not a name it writes
    assert not (out / MARKER).exists()  # a user's folder never becomes sodkit's


def test_sodkit_test_leaves_the_training_results_alone(trained, data_root, tmp_path):
    run = tmp_path / "t"
    shutil.copytree(trained, run)
    before = snapshot(run)
    args = ["test", str(DEMO), *tiny_overrides(data_root, tmp_path, "t"),
            "--checkpoint", str(run / "checkpoints" / "best.pt")]
    assert main(args) == 0
    after = snapshot(run)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing replaced
    assert json.loads((run / "eval" / "best" / "results.json").read_text()).keys() == {"DUTS-TE"}
    assert main(args) == 2  # a second evaluation of best.pt needs --overwrite
    assert main([*args, "--overwrite"]) == 0
    assert {k: v for k, v in snapshot(run).items() if k in before} == before


# ---------------------------------------------------------------- no unpickling of code
class _WritesAFile:
    """Unpickling this calls ``open(path, "w")``: a stand-in for any code a file could run."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return builtins.open, (self.path, "w")


def test_a_checkpoint_that_runs_code_is_refused_everywhere(trained, data_root, tmp_path, run_cli):
    pwned = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    state["model"]["payload"] = _WritesAFile(pwned)
    torch.save(state, evil)
    overrides = tiny_overrides(data_root, tmp_path, "run")
    (tmp_path / "in").mkdir()
    shutil.copy(data_root / "DUTS-TE" / "DUTS-TE-Image" / "sun_te_000.jpg", tmp_path / "in")
    commands = [
        ["test", str(DEMO), *overrides, "--checkpoint", str(evil)],
        ["predict", "--checkpoint", str(evil), "--out", str(tmp_path / "p"), str(tmp_path / "in")],
        ["train", str(DEMO), *overrides, "--resume", str(evil)],
        ["train", str(DEMO), *tiny_overrides(data_root, tmp_path, "ft"),
         f"model.init_from={evil}"],
    ]
    for args in commands:
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args[0], proc.stderr[-2000:])
        assert "never unpickles code" in proc.stderr and "io.open" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert not pwned.exists(), args[0]
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "ft").exists()
    torch.load(evil, weights_only=False)  # the file really would have run code
    assert pwned.exists()


def test_every_checkpoint_sodkit_writes_loads_weights_only(trained):
    paths = sorted((trained / "checkpoints").glob("*.pt"))
    assert {"best.pt", "last.pt"} <= {p.name for p in paths}
    for path in paths:
        state = torch.load(path, weights_only=True)
        assert state["format"] == 2
        if path.name == "best.pt":  # weights for evaluation and fine-tuning, no run state (#28)
            assert "rng" not in state and "optimizer" not in state
        else:
            assert isinstance(state["rng"][0]["numpy"], dict)


def test_a_legacy_checkpoint_is_refused_then_converted_once(trained, data_root, tmp_path, run_cli):
    legacy = tmp_path / "old.pt"
    state = torch.load(trained / "checkpoints" / "last.pt", weights_only=True)
    for key in ("format", "world_size", "ranks"):
        state.pop(key)
    np.random.seed(7)
    original_rng = np.random.get_state()
    state["rng"] = {"python": random.getstate(), "numpy": original_rng,  # as sodkit 0.1 did
                    "torch": torch.get_rng_state()}
    torch.save(state, legacy)
    with pytest.raises(UserError, match="convert-checkpoint"):
        load_checkpoint(legacy)
    proc = run_cli("convert-checkpoint", str(legacy), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "old.pt.orig").read_bytes() != legacy.read_bytes()
    converted = load_checkpoint(legacy)
    restored = numpy_state(converted["rng"]["numpy"])
    assert restored[0] == original_rng[0] and np.array_equal(restored[1], original_rng[1])
    assert restored[2:] == original_rng[2:]
    for key, value in state["model"].items():
        assert torch.equal(converted["model"][key], value)
    args = ["test", str(DEMO), *tiny_overrides(data_root, tmp_path, "r"), "--checkpoint",
            str(legacy)]
    assert main(args) == 0


def test_convert_refuses_a_file_that_runs_code(tmp_path, run_cli):
    evil = tmp_path / "evil.pt"
    torch.save({"model": {}, "x": _WritesAFile(tmp_path / "pwned")}, evil)
    proc = run_cli("convert-checkpoint", str(evil), cwd=tmp_path)
    assert proc.returncode == 2 and "never unpickles code" in proc.stderr
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "evil.pt.orig").exists()


def test_numpy_state_round_trips_through_plain_values():
    rng_state = np.random.RandomState(3).get_state()
    back = numpy_state(plain_numpy_state(rng_state))
    generator = np.random.RandomState()
    generator.set_state(back)
    expected = np.random.RandomState(3)
    assert np.array_equal(generator.random_sample(5), expected.random_sample(5))


def test_pretrained_weights_that_run_code_are_refused(tmp_path):
    from sodkit.backbone.weights import read_state_dict

    path = tmp_path / "backbone.pth"
    torch.save({"conv.weight": torch.zeros(1), "x": _WritesAFile(tmp_path / "pwned")}, path)
    with pytest.raises(UserError, match="model.pretrained.*never unpickles code|never unpickles"):
        read_state_dict(path)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("what", ["a folder", "a truncated file"])
def test_a_checkpoint_path_that_is_no_checkpoint_gets_one_line(trained, tmp_path, what):
    if what == "a folder":
        path = trained
    else:
        path = tmp_path / "cut.pt"
        data = (trained / "checkpoints" / "last.pt").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError) as info:
        load_checkpoint(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- YAML is data
def test_yaml_tags_that_would_run_code_are_config_errors(tmp_path, run_cli):
    recipe = tmp_path / "evil.yaml"
    recipe.write_text(f'name: !!python/object/apply:builtins.open ["{tmp_path / "pwned"}", "w"]\n')
    proc = run_cli("train", str(recipe), cwd=tmp_path)
    assert proc.returncode == 2 and "not valid YAML" in proc.stderr
    assert not (tmp_path / "pwned").exists()
    override = run_cli("train", str(DEMO), "name=!!python/object/apply:os.getcwd []",
                       cwd=tmp_path)
    assert override.returncode == 2 and "Traceback" not in override.stderr


def test_eval_never_writes_into_its_inputs_or_a_user_folder(tmp_path, run_cli):
    import cv2

    gt, preds = tmp_path / "gt", tmp_path / "preds" / "ours"
    for folder in (gt, preds):
        folder.mkdir(parents=True)
        cv2.imwrite(str(folder / "a.png"), np.full((8, 8), 200, np.uint8))
    cv2.imwrite(str(preds / "pr.png"), np.zeros((8, 8), np.uint8))  # a stem named like an output
    before = snapshot(tmp_path)
    for out in (str(preds), str(tmp_path / "preds"), str(gt)):
        proc = run_cli("eval", "--gt", str(gt), "--pred", f"ours={preds}", "--out", out,
                       cwd=tmp_path)
        assert proc.returncode == 2 and "holds the input" in proc.stderr, out
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.json").write_text("{}")
    before = snapshot(tmp_path)
    proc = run_cli("eval", "--gt", str(gt), "--pred", f"ours={preds}", "--out", str(mine),
                   cwd=tmp_path)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert snapshot(tmp_path) == before
    assert run_cli("eval", "--gt", str(gt), "--pred", f"ours={preds}", "--out",
                   str(tmp_path / "res"), cwd=tmp_path).returncode == 0
    assert (tmp_path / "res" / MARKER).is_file() and (tmp_path / "res" / "results.json").is_file()
