"""PySODEvalToolkit's own JSON files (#33): ``sodkit eval --datasets DATASETS.json --methods
METHODS.json`` reads the toolkit's dataset and method files as they are (the shapes of its
``examples/config_dataset_json_example.json`` and ``config_method_json_example.json``: ``mask``
and ``image`` with ``path``, ``prefix``, ``suffix``, an ``index_file``; per method and dataset
``path``, ``prefix``, ``suffix``) and gives the numbers of the same files named plainly. The
files are input from anywhere: bounded, every name and affix checked, relative paths relative
to the file."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from tests.families_fixtures import camouflaged_image

STEMS = [f"{i:04d}" for i in range(6)]


@pytest.fixture()
def toolkit(tmp_path: Path) -> Path:
    """data/{ECSSD,PASCAL-S}/{Mask,Image} named gt_<n>.png / im_<n>.jpg, predictions of three
    methods named three ways, plain copies (plain/<dataset>/<method>/<n>.png) to compare."""
    rng = np.random.default_rng(12)
    for dataset in ("ECSSD", "PASCAL-S"):
        for stem in STEMS:
            pred, gt = realistic_pair(rng, 30, 40)
            files = {f"data/{dataset}/Mask/gt_{stem}.png": gt,
                     f"data/{dataset}/Image/im_{stem}.jpg": camouflaged_image(gt, 3)[:, :, ::-1],
                     f"preds/one/{dataset}/one_{stem}.png": pred,
                     f"preds/two/{dataset.lower()}/{stem}_sal.png": 255 - pred,
                     f"plain/{dataset}/gt/{stem}.png": gt,
                     f"plain/{dataset}/one/{stem}.png": pred,
                     f"plain/{dataset}/two/{stem}.png": 255 - pred}
            if dataset == "ECSSD":
                files[f"abs/three/{stem}.png"] = np.roll(pred, 3, axis=1)
                files[f"plain/{dataset}/three/{stem}.png"] = np.roll(pred, 3, axis=1)
            for name, image in files.items():
                (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(tmp_path / name), image, [cv2.IMWRITE_JPEG_QUALITY, 100])
        (tmp_path / "data" / dataset / "test.lst").write_text(
            "".join(f"gt_{stem}.png\n" for stem in STEMS[:5]))
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "datasets.json").write_text(json.dumps({
        dataset: {"image": {"path": f"../data/{dataset}/Image", "prefix": "im_",
                            "suffix": ".jpg"},
                  "mask": {"path": f"../data/{dataset}/Mask", "prefix": "gt_", "suffix": ".png"},
                  "index_file": f"../data/{dataset}/test.lst"}
        for dataset in ("ECSSD", "PASCAL-S")}, indent=2))
    (configs / "methods.json").write_text(json.dumps({
        "one": {d: {"path": f"../preds/one/{d}", "prefix": "one_", "suffix": ".png"}
                for d in ("ECSSD", "PASCAL-S")},
        "two": {d: {"path": f"../preds/two/{d.lower()}", "suffix": "_sal.png"}
                for d in ("ECSSD", "PASCAL-S", "DUTS-TE")}}, indent=2))
    (configs / "ours.json").write_text(json.dumps({  # a second file, an absolute path
        "three": {"ECSSD": {"path": str(tmp_path / "abs" / "three"), "suffix": ".png"}}}))
    return tmp_path


def test_the_toolkit_files_give_the_numbers_of_the_same_files_named_plainly(toolkit):
    configs = toolkit / "configs"
    assert main(["eval", "--datasets", str(configs / "datasets.json"), "--methods",
                 str(configs / "methods.json"), "--methods", str(configs / "ours.json"),
                 "--out", str(toolkit / "ev"), "--compute", "all"]) == 0
    for dataset, methods in (("ECSSD", ("one", "two", "three")), ("PASCAL-S", ("one", "two"))):
        ours = json.loads((toolkit / "ev" / dataset / "results.json").read_text())
        assert list(ours) == list(methods)  # three names no PASCAL-S: not evaluated there
        plain = toolkit / "plain" / dataset
        (toolkit / "list.txt").write_text("\n".join(STEMS[:5]))  # the index file's five
        assert main(["eval", "--gt", str(plain / "gt"), "--list", str(toolkit / "list.txt"),
                     *(a for m in methods for a in ("--pred", str(plain / m))),
                     "--out", str(toolkit / f"plain-{dataset}")]) == 0
        reference = json.loads((toolkit / f"plain-{dataset}" / "results.json").read_text())
        for method in methods:
            assert {k: ours[method][k] for k in reference[method]} == reference[method]
            assert "CCM" in ours[method]  # the dataset file gives the images: all includes CCM
    rows = (toolkit / "ev" / "ECSSD" / "results_per_image.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 5 and ",0000," in rows[1]


@pytest.mark.parametrize("datasets, methods, words", [
    (None, {"one": {"ECSSD": {"path": "x", "prefix": "../", "suffix": ".png"}}},
     "one.ECSSD.prefix: '../' cannot be part of a file name"),
    (None, {"../up": {"ECSSD": {"path": "x", "suffix": ".png"}}}, "'../up' is not a valid name"),
    (None, {"one": {"ECSSD": {"path": "x", "suffix": "\x1b[2J.png"}}}, "control character"),
    (None, {"one": {"ECSSD": {"path": "x", "sufix": ".png"}}}, "unknown key(s) sufix"),
    ({"results.json": {"mask": {"path": "m", "suffix": ".png"}}}, None,
     "is the name of a file sodkit writes"),
    ({"ECSSD": {"mask": {"path": "m\x07", "suffix": ".png"}}}, None, "ECSSD.mask.path"),
    ({"ECSSD": {"image": {"path": "m"}}}, None, "expected a name without '=' and {\"mask\""),
    ({"ECSSD": {"mask": {"path": "m", "suffix": ".png"}, "depth": {}}}, None,
     "unknown key(s) depth"),
    ("x" * (2 << 20), None, "MiB a YAML file may have"),
])
def test_a_bad_toolkit_file_is_one_line_before_any_work(toolkit, capsys, datasets, methods,
                                                        words):
    configs = toolkit / "configs"
    if datasets is not None:
        (configs / "bad_datasets.json").write_text(
            datasets if isinstance(datasets, str) else json.dumps(datasets))
    if methods is not None:
        (configs / "bad_methods.json").write_text(json.dumps(methods))
    code = main(["eval", "--datasets", str(configs / ("bad_datasets.json" if datasets is not None
                                                      else "datasets.json")),
                 "--methods", str(configs / ("bad_methods.json" if methods is not None
                                             else "methods.json")),
                 "--out", str(toolkit / "ev")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and words in err[-1], err
    assert "\x1b" not in err[-1] or "'" in err[-1]  # shown quoted, never sent as is
    assert not (toolkit / "ev").exists()


def test_without_gt_or_datasets_the_command_says_what_to_give(toolkit, capsys):
    assert main(["eval", "--pred", str(toolkit / "preds" / "one"), "--out",
                 str(toolkit / "ev")]) == 2
    assert "--gt [NAME=]DIR, or --datasets FILE" in capsys.readouterr().err
