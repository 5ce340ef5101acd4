"""``sodkit eval --groups`` (#25): video / co-salient datasets, a GT sub-folder per group,
evaluated per group and averaged over groups as PySODEvalToolkit's ``--data-type video`` does
(metrics of an image set: mean of the groups'; curves: mean of the groups' curves, max / mean
taken on it), checked against PySODMetrics per group; ``--frames`` keeps a slice of each group's
frames in the order of the numbers their names end with."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.testing import realistic_pair
from tests.metrics_fixtures import reference_metrics

GROUPS = {"bear": 4, "car": 11}  # car's frames 1..11: frame10 sorts after frame9


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    rng = np.random.default_rng(13)
    for group, count in GROUPS.items():
        for frame in range(1, count + 1):
            pred, gt = realistic_pair(rng, 24 + frame % 3, 30)
            for folder, image in (("gt", gt), ("m", pred)):
                path = tmp_path / folder / group / f"frame{frame}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                assert cv2.imwrite(str(path), image)
    return tmp_path


def grouped_reference(root: Path, frames: slice = slice(None)) -> dict[str, float]:
    """PySODMetrics per group, averaged the way PySODEvalToolkit's GroupedMetricRecorder does."""
    groups = []
    for group, count in GROUPS.items():
        names = [f"frame{i}.png" for i in range(1, count + 1)][frames]
        groups.append(reference_metrics(
            [(cv2.imread(str(root / "m" / group / n), 0), cv2.imread(str(root / "gt" / group / n),
                                                                      0)) for n in names]))
    mean = {key: np.mean([g[key] for g in groups], axis=0) for key in groups[0]}
    out = {key: float(mean[key]) for key in ("MAE", "Smeasure", "wFmeasure", "adpFm", "adpEm",
                                             "adpIoU")}
    out["maxFm"], out["meanFm"] = mean["fm_curve"].max(), mean["fm_curve"].mean()
    out["maxEm"], out["meanEm"] = mean["em_curve"].max(), mean["em_curve"].mean()
    out["maxIoU"], out["meanDice"] = mean["iou_curve"].max(), mean["dice_curve"].mean()
    return out


def run(root: Path, *extra: str) -> int:
    return main(["eval", "--gt", str(root / "gt"), "--pred", f"m={root / 'm'}",
                 "--out", str(root / "out"), "--groups", *extra])


@pytest.mark.parametrize("frames", [None, "1:-1"])
def test_groups_are_averaged_as_the_toolkit_does(root, frames):
    assert run(root, *(["--frames", frames] if frames else [])) == 0
    ours = json.loads((root / "out" / "results.json").read_text())["m"]
    expected = grouped_reference(root, slice(1, -1) if frames else slice(None))
    for key, value in expected.items():
        assert abs(ours[key] - value) <= 1e-9, (key, ours[key], value)
    rows = (root / "out" / "results_per_image.csv").read_text().splitlines()
    stems = [row.split(",")[2] for row in rows[1:]]
    if frames:
        assert "car/frame1" not in stems and "car/frame11" not in stems
        assert "car/frame10" in stems and len(stems) == 2 + 9
    else:
        assert len(stems) == 15 and stems[0] == "bear/frame1"


def test_group_average_differs_from_pooling_every_frame(root):
    assert run(root) == 0
    ours = json.loads((root / "out" / "results.json").read_text())["m"]
    pooled = [(cv2.imread(str(p), 0), cv2.imread(str(root / "gt" / p.parent.name / p.name), 0))
              for p in sorted((root / "m").glob("*/*.png"))]
    assert abs(ours["MAE"] - reference_metrics(pooled)["MAE"]) > 1e-6  # groups weigh the same


def test_group_options_are_checked(root, capsys):
    assert main(["eval", "--gt", str(root / "gt" / "bear"), "--pred", str(root / "m" / "bear"),
                 "--out", str(root / "o"), "--frames", "1:"]) == 2
    assert "give --groups as well" in capsys.readouterr().err
    assert main(["eval", "--gt", str(root / "gt" / "bear"), "--pred", str(root / "m" / "bear"),
                 "--out", str(root / "o"), "--groups"]) == 2
    assert "holds no sub-folder (one per video or group)" in capsys.readouterr().err
    assert run(root, "--compute", "CCM", "--images", str(root / "gt")) == 2
    assert "does not go with --groups" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run(root, "--frames", "x")
