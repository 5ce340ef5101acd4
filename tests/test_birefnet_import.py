"""``sodkit import-weights birefnet``: which backbone a released file has is read from its
tensors' shapes, the model file gets that backbone and BiRefNet's inference pipeline, and a
file that fits no backbone is refused with what was found.

Fixtures recorded from the original (ZhengPeng7/BiRefNet 25cb930):
``birefnet_backbone_keys.json.gz`` holds the ``bb.`` names and shapes of each of its
backbones (Swin v1 T/S/B/L, PVTv2 b0-b5; ``benchmarks/birefnet_parity.py
--record-backbones``), ``birefnet_keys.json`` the whole network's for Swin-T and PVTv2-b0.
``benchmarks/import_parity.py --birefnet`` runs the original's own inference against
``import-weights`` + ``predict``.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import sodkit
from sodkit.cli import main
from sodkit.config.loader import stored_config
from sodkit.config.schema import ModelCfg
from sodkit.errors import UserError
from sodkit.imageio import read_image
from sodkit.inference.pipelines import build_test_transform, postprocess_of
from sodkit.model_file import read_model_file
from sodkit.network import build_network
from sodkit.published.birefnet import BACKBONES, TIMM, recognise, rename_for

HERE = Path(__file__).parent
with gzip.open(HERE / "birefnet_backbone_keys.json.gz", "rt") as _f:
    BACKBONE_KEYS = json.load(_f)
NETWORK_KEYS = json.loads((HERE / "birefnet_keys.json").read_text())


def _meta(keys: dict[str, list[int]]) -> dict[str, torch.Tensor]:
    return {k: torch.empty(shape, device="meta") for k, shape in keys.items()}


def test_the_fixture_has_every_backbone_of_the_original():
    assert sorted(k for k in BACKBONE_KEYS if k[0] != "_") == sorted(BACKBONES)
    for name in ("swin_v1_t", "pvt_v2_b0"):  # the backbone alone = the backbone in BiRefNet
        assert BACKBONE_KEYS[name] == {k: v for k, v in NETWORK_KEYS[name].items()
                                       if k.startswith("bb.")}


@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_each_backbone_is_recognised_from_its_shapes(name):
    assert recognise(_meta(BACKBONE_KEYS[name])).name == name


@pytest.mark.slow  # ten timm backbones built, on the meta device still 1-4 s each
@pytest.mark.parametrize("name", sorted(BACKBONES))
def test_each_backbones_tensors_rename_onto_its_timm_backbone(name):
    """One to one, with shapes, onto sodkit's backbone (and Swin's level norms) of the timm
    model the file is recognised as (the whole network: tests/test_birefnet.py, Swin-T and
    PVTv2-b0)."""
    shape = recognise(_meta(BACKBONE_KEYS[name]))
    rename = rename_for(shape.family)
    with torch.device("meta"):
        net = build_network(ModelCfg(name="birefnet", backbone=shape.timm))
    mine = {k: list(v.shape) for k, v in net.state_dict().items()
            if k.startswith(("backbone.", "backbone_norms."))}
    renamed = {rename(k): v for k, v in BACKBONE_KEYS[name].items() if rename(k) != ""}
    assert renamed == mine


def test_shapes_that_fit_no_backbone_are_refused_with_what_was_found():
    keys = {k: v for k, v in BACKBONE_KEYS["swin_v1_t"].items()
            if not k.startswith("bb.layers.2.blocks.5.")}  # stage 3: 5 blocks, not 6
    with pytest.raises(UserError) as exc:
        recognise(_meta(keys), "x.pth")
    assert "fits none of the original's swin_v1_t/s/b/l" in str(exc.value)
    assert "found: Swin, embed dim 96, depths [2, 2, 5, 2], heads [3, 6, 12, 24], window 7" \
        in str(exc.value)
    pvt = dict(BACKBONE_KEYS["pvt_v2_b1"])
    pvt["bb.patch_embed1.proj.weight"] = [48, 3, 7, 7]
    with pytest.raises(UserError, match=r"found: PVTv2, stage widths \[48, 128, 320, 512\], "
                                        r"depths \[2, 2, 2, 2\], MLP ratio 10"):
        recognise(_meta(pvt))
    flat = dict(BACKBONE_KEYS["swin_v1_b"])
    flat["bb.layers.0.blocks.0.attn.relative_position_bias_table"] = [529]  # wrong rank
    with pytest.raises(UserError, match=r"heads \[0, 8, 16, 32\], window 12\)"):
        recognise(_meta(flat))
    with pytest.raises(UserError, match="no backbone patch embedding"):
        recognise(_meta({"decoder.conv_out1.0.weight": [1, 32, 1, 1]}))


def _recipe(tmp_path: Path) -> Path:
    """A stand-in for the published general recipe: Swin-L, as the release's default."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: general\nmodel: {name: birefnet, backbone: "
                      "swin_large_patch4_window12_384}\ndata: {size: 64}\n")
    return recipe


def test_a_file_that_fits_no_backbone_is_refused_in_one_line(tmp_path, capsys):
    keys = dict(NETWORK_KEYS["swin_v1_t"])
    keys["bb.patch_embed.proj.weight"] = [112, 3, 4, 4]
    source = tmp_path / "BiRefNet.pth"
    torch.save({k: torch.zeros(()).expand(v) for k, v in keys.items()}, source)
    out = tmp_path / "o.safetensors"
    assert main(["import-weights", "birefnet", str(source), "--out", str(out), "--recipe",
                 str(_recipe(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "found: Swin, embed dim 112, depths [2, 2, 6, 2]" in err and not out.exists()


def test_a_released_safetensors_file_imports_as_its_backbone_and_predicts(tmp_path):
    """PVTv2-b0 in the original's names, as a ``.safetensors`` file (the Hugging Face release's
    format) with ``_orig_mod.`` / ``module.`` prefixes, against a Swin-L recipe: the model file
    says pvt_v2_b0 and BiRefNet's pipeline, holds the file's weights, and ``sodkit predict``
    makes the masks that pipeline makes from the network's output, the Python API the same
    maps."""
    gen = torch.Generator().manual_seed(0)
    state = {k: (torch.zeros(v, dtype=torch.long) if k.endswith("num_batches_tracked") else
                 torch.rand(v, generator=gen) * 0.2 - 0.1)
             for k, v in NETWORK_KEYS["pvt_v2_b0"].items()}
    for key in state:
        if key.endswith("running_var"):
            state[key] = state[key].abs() + 0.5
    source = tmp_path / "model.safetensors"
    save_file({f"_orig_mod.module.{k}": v for k, v in state.items()}, str(source))
    out = tmp_path / "birefnet.safetensors"
    assert main(["import-weights", "birefnet", str(source), "--out", str(out), "--recipe",
                 str(_recipe(tmp_path))]) == 0
    model = read_model_file(out)
    cfg = stored_config(model["config"], out)
    assert (cfg.model.backbone, cfg.data.preprocess) == (TIMM["pvt_v2_b0"], "birefnet")
    assert model["provenance"]["released_as"] == "BiRefNet (ZhengPeng7/BiRefNet), pvt_v2_b0"
    assert torch.equal(model["model"]["backbone.body.stages_2.blocks.1.mlp.dwconv.weight"],
                       state["bb.block3.1.mlp.dwconv.dwconv.weight"])
    images = tmp_path / "in"
    images.mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(images / "a.jpg"), rng.integers(0, 255, (50, 70, 3), dtype=np.uint8))
    assert main(["predict", str(images), "--checkpoint", str(out), "--out",
                 str(tmp_path / "masks"), "--device", "cpu", "--workers", "0"]) == 0
    mask = cv2.imread(str(tmp_path / "masks" / "a.png"), cv2.IMREAD_GRAYSCALE)
    net = build_network(cfg.model).eval()
    net.load_state_dict(model["model"])
    transform = build_test_transform(cfg.data)
    image = read_image(images / "a.jpg")
    with torch.no_grad():
        probs = torch.sigmoid(net(transform(image)[None])["logits"])
    assert np.array_equal(mask, postprocess_of(transform).to_mask(probs, image.shape[:2]))
    api = sodkit.load(out, device="cpu").predict(images / "a.jpg")  # the API follows it too
    assert np.abs(api * 255 - mask).max() <= 1.0


def test_the_published_general_recipe_is_the_default_recipe(tmp_path):
    """Without --recipe, `import-weights birefnet` takes configs/general_birefnet_swinl.yaml and
    sets the backbone the shapes say (here PVTv2-b0) and BiRefNet's own inference pipeline."""
    state = {k: torch.zeros(v, dtype=torch.long if k.endswith("num_batches_tracked")
                            else torch.float32)
             for k, v in NETWORK_KEYS["pvt_v2_b0"].items()}
    source = tmp_path / "model.safetensors"
    save_file(state, str(source))
    out = tmp_path / "birefnet.safetensors"
    assert main(["import-weights", "birefnet", str(source), "--out", str(out)]) == 0
    cfg = stored_config(read_model_file(out)["config"], out)
    assert (cfg.model.name, cfg.model.backbone) == ("birefnet", TIMM["pvt_v2_b0"])
    assert (cfg.data.size, cfg.data.preprocess) == (1024, "birefnet")
    assert cfg.loss.terms["mae"] == 100.0  # the General task's MAE term
