"""``sodkit import-weights``: the authors' released MINet and F3Net checkpoints as model files.

Without the original code: ``published_keys.json`` holds the state-dict keys and shapes of the
originals (recorded by ``benchmarks/import_parity.py --record``, which also proves the masks
equal to the originals' own inference). Synthetic files in those names stand in for the
releases: saved in torch's legacy format as the 2020 releases were, F3Net's in float16 but for
BatchNorm as apex O2 leaves it. Refusals use files of zero-stride tensors (one stored value
each), which are a few kilobytes whatever the shapes they declare.
"""

from __future__ import annotations

import builtins
import json
from collections import OrderedDict
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from sodkit.cli import main
from sodkit.config.loader import stored_config
from sodkit.model_file import file_sha256, read_model_file
from sodkit.network import build_network
from sodkit.published import format_names, get_format
from sodkit.published.convert import match_release, release_config, strip_prefixes

KEYS = json.loads((Path(__file__).parent / "published_keys.json").read_text())


def _norm_owner(key: str, keys: set[str]) -> bool:
    """Whether ``key`` belongs to a BatchNorm (its owner has running statistics)."""
    return f"{key.rsplit('.', 1)[0]}.running_var" in keys


def synthetic(fmt: str, half: bool = False, seed: int = 0) -> OrderedDict:
    """Random weights in the authors' names, at a scale that keeps a ResNet-50 finite."""
    gen = torch.Generator().manual_seed(seed)
    names = {k for k, _ in KEYS[fmt]}
    state = OrderedDict()
    for key, shape in KEYS[fmt]:
        leaf = key.rsplit(".", 1)[1]
        if leaf == "num_batches_tracked":
            state[key] = torch.tensor(1000, dtype=torch.long)
            continue
        norm = _norm_owner(key, names)
        if norm and leaf in ("weight", "running_var"):
            value = torch.rand(shape, generator=gen) + 0.5
        elif norm or leaf == "bias":
            value = (torch.rand(shape, generator=gen) - 0.5) * 0.2
        else:  # conv weights: PyTorch's default scale
            fan_in = int(np.prod(shape[1:]))
            value = torch.randn(shape, generator=gen) / (3 * fan_in) ** 0.5
        state[key] = value.half() if half and not norm else value
    return state


def hollow(fmt: str, change: dict | None = None) -> OrderedDict:
    """Zero-stride tensors of the release's shapes (the file stores one value per tensor);
    ``change`` maps keys to a new name (str), a new shape (list) or None (dropped)."""
    state = OrderedDict()
    for key, shape in KEYS[fmt]:
        new = (change or {}).get(key, key)
        if new is None:
            continue
        if isinstance(new, list):
            key, shape = key, new
        else:
            key = new
        state[key] = torch.zeros(()).expand(shape)
    return state


def save_legacy(state: dict, path: Path) -> Path:
    torch.save(state, path, _use_new_zipfile_serialization=False)
    return path


def photo(path: Path, height: int, width: int) -> Path:
    rng = np.random.default_rng(height * width)
    image = cv2.resize(rng.integers(0, 255, (4, 4, 3), dtype=np.uint8), (width, height),
                       interpolation=cv2.INTER_CUBIC)
    cv2.imwrite(str(path), image)
    return path


def import_cli(fmt: str, source: Path, out: Path, *extra: str) -> int:
    return main(["import-weights", fmt, str(source), "--out", str(out), *extra])


def test_the_formats_are_registered():
    assert format_names() == ["birefnet", "f3net-r50", "minet-r50"]
    assert get_format("minet-r50").preprocess == "minet"


@pytest.mark.parametrize("fmt", ["minet-r50", "f3net-r50"])
def test_every_original_tensor_has_its_sodkit_name_and_shape(fmt):
    """Each key the original has renames to a distinct tensor of the recipe's network with its
    shape, and every tensor of the network is covered, but MINet's optional side heads."""
    release = get_format(fmt)
    with torch.device("meta"):
        net = build_network(stored_config(release_config(release), fmt).model)
        weights = {k: torch.empty(shape) for k, shape in KEYS[fmt]}
    renamed, fill = match_release(weights, net.state_dict(), release, Path(fmt))
    assert len(renamed) == len(weights)  # one to one
    expected = {"minet-r50": [f"side_heads.{i}.{leaf}" for i in range(4)
                              for leaf in ("weight", "bias")], "f3net-r50": []}[fmt]
    assert sorted(fill) == sorted(expected)


def test_f3net_release_imports_and_predicts(tmp_path):
    """A legacy-format, float16 (but BatchNorm) file under DDP's ``module.`` prefix -> a model
    file with float32 weights equal to the file's, the recipe's config with F3Net's inference
    pipeline, provenance; ``sodkit predict`` takes it and writes masks at each image's size."""
    state = synthetic("f3net-r50", half=True)
    source = save_legacy(OrderedDict((f"module.{k}", v) for k, v in state.items()),
                         tmp_path / "model-32")
    out = tmp_path / "f3net.safetensors"
    assert import_cli("f3net-r50", source, out) == 0
    model = read_model_file(out)
    weights = model["model"]
    assert {v.dtype for v in weights.values() if v.is_floating_point()} == {torch.float32}
    assert torch.equal(weights["squeeze.3.0.weight"], state["squeeze5.0.weight"].float())
    assert torch.equal(weights["decoder2.0.fine.3.1.running_var"],
                       state["decoder2.cfm23.bn4h.running_var"])
    assert model["provenance"]["sha256"] == file_sha256(source)
    assert {k: model["provenance"][k] for k in ("source", "format")} == {
        "source": "model-32", "format": "f3net-r50"}
    assert "sodkit_version" in model["provenance"]
    cfg = stored_config(model["config"], out)
    assert (cfg.model.name, cfg.model.pretrained, cfg.data.preprocess, cfg.data.size) == (
        "f3net", None, "f3net", 352)
    images = tmp_path / "in"
    images.mkdir()
    for h, w in ((90, 130), (200, 150)):
        photo(images / f"p{h}.jpg", h, w)
    assert main(["predict", str(images), "--checkpoint", str(out), "--out",
                 str(tmp_path / "masks"), "--device", "cpu", "--workers", "0"]) == 0
    for h, w in ((90, 130), (200, 150)):
        mask = cv2.imread(str(tmp_path / "masks" / f"p{h}.png"), cv2.IMREAD_GRAYSCALE)
        assert mask.shape == (h, w) and mask.std() > 0  # a prediction, not a constant


@pytest.mark.slow  # builds F3Net-R50 twice (predict, test)
def test_sodkit_test_evaluates_an_import_with_its_authors_pipeline(data_root, tmp_path, caplog):
    """The published recipe (its data.preprocess unset) + the model file: ``sodkit test``
    follows the file's f3net pipeline, and its masks are ``sodkit predict``'s."""
    source = save_legacy(synthetic("f3net-r50", half=True, seed=1), tmp_path / "model-32")
    model = tmp_path / "f3net.safetensors"
    assert import_cli("f3net-r50", source, model) == 0
    images = data_root / "DUTS-TE" / "DUTS-TE-Image"
    assert main(["predict", str(images), "--checkpoint", str(model), "--out",
                 str(tmp_path / "masks"), "--device", "cpu", "--workers", "0"]) == 0
    recipe = Path(__file__).resolve().parents[1] / "configs" / "duts_f3net_r50.yaml"
    with caplog.at_level("INFO"):
        assert main(["test", str(recipe), "--checkpoint", str(model), f"data_root={data_root}",
                     f"output_root={tmp_path}", "data.test=[{preset: duts-te}]",
                     "data.num_workers=0", "runtime.device=cpu", "runtime.precision=fp32",
                     "--out", str(tmp_path / "eval")]) == 0
    assert "inference pipeline: f3net" in caplog.text
    tested = sorted((tmp_path / "eval" / "predictions" / "DUTS-TE").glob("*.png"))
    assert tested
    for path in tested:
        assert np.array_equal(cv2.imread(str(path), cv2.IMREAD_UNCHANGED),
                              cv2.imread(str(tmp_path / "masks" / path.name), cv2.IMREAD_UNCHANGED))


@pytest.mark.slow  # 162M parameters: a 650 MB file read, written and loaded
def test_minet_release_imports_and_loads(tmp_path):
    state = synthetic("minet-r50")
    source = save_legacy(state, tmp_path / "MINet_Res50.pth")
    out = tmp_path / "minet.safetensors"
    assert import_cli("minet-r50", source, out) == 0
    model = read_model_file(out)
    cfg = stored_config(model["config"], out)
    assert (cfg.model.name, cfg.data.preprocess, cfg.data.size) == ("minet", "minet", 320)
    assert model["provenance"]["fresh"] == [f"side_heads.{i}" for i in range(4)]
    with torch.device("meta"):  # the network's names and shapes, without initialising 162M
        net = build_network(cfg.model)
    # strict: every tensor there, each of the network's shape (checked before it is assigned)
    net.load_state_dict(model["model"], assign=True)
    assert torch.equal(net.aim[4].identity.weight, state["trans.conv4.identity.weight"])


def _refused(capsys, fmt: str, source: Path, out: Path, *needles: str) -> str:
    assert import_cli(fmt, source, out) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not out.exists()
    return err


def test_wrong_names_are_refused_with_counts_and_names(tmp_path, capsys):
    change = {"linearr5.weight": "linear_r5.weight", "squeeze2.0.bias": "squeeze2.0.b"}
    source = save_legacy(hollow("f3net-r50", change), tmp_path / "model-32")
    _refused(capsys, "f3net-r50", source, tmp_path / "o.safetensors",
             "is not F3Net (weijun88/F3Net)'s model-32", "2 tensors that release does not have",
             "linear_r5.weight", "2 of its tensors missing", "side_heads.3.weight")


def test_wrong_shapes_and_missing_tensors_are_refused(tmp_path, capsys):
    change = {"squeeze5.0.weight": [32, 2048, 1, 1], "linearp1.bias": None}
    source = save_legacy(hollow("f3net-r50", change), tmp_path / "model-32")
    _refused(capsys, "f3net-r50", source, tmp_path / "o.safetensors",
             "1 of the wrong shape (squeeze5.0.weight [32, 2048, 1, 1] (expected "
             "[64, 2048, 1, 1]))", "1 of its tensors missing (sodkit names: head1.bias)")


def test_the_other_release_is_refused(tmp_path, capsys):
    source = save_legacy(hollow("minet-r50"), tmp_path / "MINet_Res50.pth")
    _refused(capsys, "f3net-r50", source, tmp_path / "o.safetensors", "871 tensors",
             "871 tensors that release does not have (div_2.0.weight")


class _WritesAFile:
    """Unpickling this calls ``open(path, "w")``: a stand-in for any code a file could run."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return builtins.open, (self.path, "w")


def test_a_file_that_needs_code_is_refused_with_its_globals(tmp_path, capsys):
    pwned = tmp_path / "pwned"
    state = hollow("f3net-r50")
    state["payload"] = _WritesAFile(pwned)
    source = save_legacy(state, tmp_path / "model-32")
    _refused(capsys, "f3net-r50", source, tmp_path / "o.safetensors",
             "never unpickles code", "open")
    assert not pwned.exists()


def test_a_file_that_is_not_a_state_dict_is_refused(tmp_path, capsys):
    source = tmp_path / "model-32"
    torch.save([torch.zeros(3)], source)
    _refused(capsys, "f3net-r50", source, tmp_path / "o.safetensors", "not a state dict")


def test_the_output_is_checked_before_the_file_is_read(tmp_path, capsys):
    source = tmp_path / "model-32"
    source.write_bytes(b"not read")
    taken = tmp_path / "taken.safetensors"
    taken.write_bytes(b"mine")
    assert import_cli("f3net-r50", source, taken) == 2
    assert "exists and was not written" in capsys.readouterr().err
    assert taken.read_bytes() == b"mine"
    assert import_cli("f3net-r50", source, tmp_path / "model.pt") == 2
    assert "ends in .safetensors" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: an unknown format lists the known ones
        import_cli("u2net", source, tmp_path / "o.safetensors")
    assert "f3net-r50" in capsys.readouterr().err


def test_prefixes_of_ddp_and_compile_are_stripped():
    assert strip_prefixes("module._orig_mod.bkbone.conv1.weight") == "bkbone.conv1.weight"
    assert strip_prefixes("_orig_mod.module.x") == "x"
    assert strip_prefixes("modules.x") == "modules.x"
