"""The optional metric families through the commands: ``sodkit eval --compute``, ``eval.compute``
in a config (``sodkit test``, training's evaluation), and the paper tables' ``--metrics``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.config.schema import EvalCfg
from sodkit.engine.checkpoint import CheckpointManager
from sodkit.errors import ConfigError
from sodkit.metrics.families import FAMILIES
from sodkit.metrics.testing import realistic_pair
from tests.families_fixtures import (
    birefnet_biou,
    birefnet_mba,
    camouflaged_image,
    reference_ccm,
    reference_hce,
)
from tests.sod_fixtures import tiny_overrides

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def folders(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(3)
    for i in range(5):
        pred, gt = realistic_pair(rng, 40 + 3 * i, 56)
        for name, image in (("gt", gt), ("a", pred)):
            (tmp_path / name).mkdir(exist_ok=True)
            assert cv2.imwrite(str(tmp_path / name / f"im{i}.png"), image)
    return {name: tmp_path / name for name in ("gt", "a")}


def _pairs(gt_dir: Path, pred_dir: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(cv2.imread(str(pred_dir / p.name), cv2.IMREAD_GRAYSCALE),
             cv2.imread(str(p), cv2.IMREAD_GRAYSCALE)) for p in sorted(gt_dir.glob("*.png"))]


def test_eval_compute_adds_the_families_to_every_output(folders, tmp_path, capsys):
    out, tex = tmp_path / "out", tmp_path / "t.tex"
    assert main(["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}", "--out",
                 str(out), "--compute", "hce,BIoU,mBA", "--workers", "1", "--latex", str(tex),
                 "--metrics", "maxFm,HCE,mBA"]) == 0
    result = json.loads((out / "results.json").read_text())["A"]
    pairs = _pairs(folders["gt"], folders["a"])
    assert result["HCE"] == reference_hce(pairs)[0]
    assert result["mBA"] == birefnet_mba(pairs)
    assert result["maxBIoU"] == birefnet_biou(pairs)["maxBIoU"]
    assert "MSE" not in result and "CM" not in result  # only what was asked
    assert "| HCE |" in (out / "results.md").read_text().splitlines()[0]
    assert "HCE" in capsys.readouterr().out  # the printed table shows the computed families
    assert "HCE" in tex.read_text() and "\\downarrow" in tex.read_text()


def test_worker_processes_compute_the_same_families(folders, tmp_path):
    for workers in ("1", "2"):
        assert main(["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}",
                     "--out", str(tmp_path / workers), "--compute", "HCE,SI,BIoU,mBA,CM,MSE",
                     "--workers", workers]) == 0
    one, two = ((tmp_path / w / "results.json").read_text() for w in ("1", "2"))
    assert one == two and "siMAE" in json.loads(one)["A"]


def test_bad_selections_are_refused_in_one_line(folders, tmp_path, capsys):
    base = ["eval", "--gt", str(folders["gt"]), "--pred", str(folders["a"])]
    assert main([*base, "--out", str(tmp_path / "o1"), "--compute", "HCE,nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("sodkit eval: error: --compute: unknown metric family nope; choose from "
                   + ", ".join(FAMILIES) + " or all")
    assert main([*base, "--out", str(tmp_path / "o2"), "--metrics", "HCE",
                 "--latex", str(tmp_path / "t.tex")]) == 2
    assert "computed only with --compute HCE" in capsys.readouterr().err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_config_selection_takes_exactly_the_registered_families():
    """eval.compute's allowed values are the families' registry (the config keeps no list of
    its own): every registered name and ``all`` pass the trainer's check before it starts, any
    other is refused naming the registered ones; a family of frame sequences (Flicker) is
    ``sodkit eval --groups``'s alone."""
    for name in [*FAMILIES, "all"]:
        if name != "all" and FAMILIES[name].sequence:
            with pytest.raises(ConfigError, match="not during training"):
                CheckpointManager.check_selection(EvalCfg(compute=[name]), ["D"])
            continue
        CheckpointManager.check_selection(EvalCfg(compute=[name]), ["D"])
    known = ", ".join(FAMILIES)
    with pytest.raises(ConfigError, match=f"^eval.compute: unknown metric family XYZ; choose "
                                          f"from {known} or all$"):
        CheckpointManager.check_selection(EvalCfg(compute=["HCE", "XYZ"]), ["D"])


def test_sodkit_test_computes_the_config_families_as_eval_does(trained, data_root, tmp_path):
    """``sodkit test`` with eval.compute (CCM reading each test image) gives what ``sodkit
    eval`` gives on its saved predictions."""
    out = tmp_path / "t"
    overrides = [*tiny_overrides(data_root, tmp_path / "o", "t"), "eval.compute=[HCE, SI, CCM]"]
    assert main(["test", str(ROOT / "configs" / "demo.yaml"), *overrides, "--checkpoint",
                 str(trained / "checkpoints" / "last.pt"), "--out", str(out)]) == 0
    tested = json.loads((out / "results.json").read_text())["DUTS-TE"]
    assert {"HCE", "siMAE", "simaxFm"} <= set(tested) and "maxBIoU" not in tested
    preds = next(p for p in out.rglob("*.png") if p.parent.name == "DUTS-TE").parent
    gt = data_root / "DUTS-TE" / "DUTS-TE-Mask"
    images = data_root / "DUTS-TE" / "DUTS-TE-Image"
    assert main(["eval", "--gt", str(gt), "--pred", f"m={preds}", "--out", str(tmp_path / "e"),
                 "--compute", "HCE,SI,CCM", "--images", str(images), "--workers", "1"]) == 0
    evaluated = json.loads((tmp_path / "e" / "results.json").read_text())["m"]
    for key in ("HCE", "siMAE", "simaxFm", "simeanFm", "siadpFm", "CCM", "MAE"):
        assert tested[key] == pytest.approx(evaluated[key], abs=1e-12), key


def test_training_refuses_a_missing_package_before_it_starts(monkeypatch):
    """The trainer checks eval.compute with eval.metric, at its start."""
    monkeypatch.setitem(FAMILIES._items, "HCE", dataclasses.replace(FAMILIES["HCE"],
                                                             needs=("sodkit_no_such_package",)))
    CheckpointManager.check_selection(EvalCfg(compute=["BIoU"]), ["D"])
    with pytest.raises(ConfigError, match=r"^eval.compute: metric family HCE needs sodkit_no"):
        CheckpointManager.check_selection(EvalCfg(compute=["BIoU", "HCE"]), ["D"])


def test_eval_reads_the_images_for_ccm(folders, tmp_path, capsys):
    images = tmp_path / "images"
    images.mkdir()
    triples = []
    for k, (pred, gt) in enumerate(_pairs(folders["gt"], folders["a"])):
        rgb = camouflaged_image(gt, k)
        assert cv2.imwrite(str(images / f"im{k}.jpg"), rgb[:, :, ::-1],
                           [cv2.IMWRITE_JPEG_QUALITY, 100])
        triples.append((pred, gt, cv2.imread(str(images / f"im{k}.jpg"))[:, :, ::-1].copy()))
    base = ["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}", "--compute",
            "CCM,CM"]
    assert main([*base, "--out", str(tmp_path / "o0")]) == 2
    assert "--compute CCM reads the images: give --images" in capsys.readouterr().err
    for workers in ("1", "2"):
        out = tmp_path / f"o{workers}"
        assert main([*base, "--images", str(images), "--out", str(out), "--workers",
                     workers]) == 0
        result = json.loads((out / "results.json").read_text())["A"]
        assert result["CCM"] == pytest.approx(reference_ccm(triples), abs=1e-9)
    (images / "im3.jpg").unlink()
    assert main([*base, "--images", str(images), "--out", str(tmp_path / "o3")]) == 2
    # the GT folder's generic name ("gt") gives way to its parent's (#28)
    assert f"no image for 1 GT stem of {tmp_path.name}: im3" in capsys.readouterr().err


def test_compute_all_with_images_includes_ccm(folders, tmp_path, caplog):
    """With --images, `all` is every family, CCM too (it said "--images is read only by
    --compute CCM; ignored"); without, every family of the masks alone, as before (#33)."""
    images = tmp_path / "images"
    images.mkdir()
    for k, (_, gt) in enumerate(_pairs(folders["gt"], folders["a"])):
        assert cv2.imwrite(str(images / f"im{k}.png"), camouflaged_image(gt, k)[:, :, ::-1])
    base = ["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}", "--compute",
            "all"]
    assert main([*base, "--images", str(images), "--out", str(tmp_path / "with")]) == 0
    assert "ignored" not in caplog.text
    with_images = json.loads((tmp_path / "with" / "results.json").read_text())["A"]
    assert set(with_images) >= {key for family in FAMILIES.values() if not family.sequence
                                for key in family.keys}  # Flicker: videos, by name
    assert main([*base, "--out", str(tmp_path / "without")]) == 0
    assert "CCM" not in json.loads((tmp_path / "without" / "results.json").read_text())["A"]


def test_per_image_csv_holds_each_images_family_values(folders, tmp_path):
    """results_per_image.csv gains a column per computed family key, before the file columns:
    each image's own value (HCE, mBA: PySODMetrics' / BiRefNet's per-image value; BIoU: max and
    mean of the image's own curve), whose column mean is the dataset's number; a method that
    lacks an image (--allow-missing) has no row for it, and `sodkit report` reads them back."""
    from sodkit.report import read_per_image_csv

    (folders["a"] / "im4.png").unlink()  # method B has every image, A all but im4
    b = folders["gt"].parent / "b"
    b.mkdir()
    for path in sorted(folders["gt"].glob("*.png")):
        gt = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        assert cv2.imwrite(str(b / path.name), cv2.GaussianBlur(gt, (9, 9), 3))
    out = tmp_path / "out"
    assert main(["eval", "--gt", str(folders["gt"]), "--pred", f"A={folders['a']}", "--pred",
                 f"B={b}", "--out", str(out), "--compute", "HCE,BIoU,mBA", "--workers", "1",
                 "--allow-missing"]) == 0
    header = (out / "results_per_image.csv").read_text().splitlines()[0].split(",")
    assert header[-7:] == ["HCE", "maxBIoU", "meanBIoU", "mBA", "image", "gt", "prediction"]
    assert "siMAE" not in header and "CM" not in header  # only the families computed
    rows = read_per_image_csv(out / "results_per_image.csv")
    results = json.loads((out / "results.json").read_text())
    for method, folder in (("A", folders["a"]), ("B", b)):
        mine = [row for row in rows if row["method"] == method]
        pairs = _pairs(folders["gt"], folder)[:4 if method == "A" else 5]  # A lacks im4
        assert [row["stem"] for row in mine] == [f"im{i}" for i in range(len(pairs))]
        assert [row["HCE"] for row in mine] == reference_hce(pairs)[1]
        for row, pair in zip(mine, pairs, strict=True):
            assert row["mBA"] == birefnet_mba([pair])
            curve = birefnet_biou([pair])
            assert row["maxBIoU"] == pytest.approx(curve["maxBIoU"], abs=1e-15)
            assert row["meanBIoU"] == pytest.approx(curve["meanBIoU"], abs=1e-15)
        for key in ("HCE", "mBA"):  # means of the column, as the references average
            assert np.mean([row[key] for row in mine]) == results[method][key], (method, key)
    assert main(["report", str(out), "--out", str(tmp_path / "r.html"), "--metrics",
                 "maxFm,maxBIoU"]) == 0
    assert "maxBIoU" in (tmp_path / "r.html").read_text()
