"""The bootstrap's bounds (#32, #33): a memory bounded by the request whatever the image and
column counts (``--ci-resamples`` 40,000 of 10 images asked for 0.7 GB at once, a million for
13 GiB), too few images refused in one line (one image gave a zero-width interval and
p = 0.002 marked significant), and a p-value that agrees with the interval beside it
(``*`` with [-0.0629, -0.0002] beside p = 0.0519)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.metrics.bootstrap import CHUNK, MIN_SAMPLES, bootstrap, resample_weights
from sodkit.metrics.testing import realistic_pair
from tests.hostile_files import run_capped
from tests.test_bootstrap import _synthetic


def _folders(root: Path, count: int) -> list[str]:
    rng = np.random.default_rng(4)
    for i in range(count):
        pred, gt = realistic_pair(rng, 30, 36)
        for name, image in (("gt", gt), ("a", pred), ("b", np.roll(pred, 2, axis=0))):
            (root / name).mkdir(exist_ok=True)
            assert cv2.imwrite(str(root / name / f"im{i}.png"), image)
    return ["eval", "--gt", str(root / "gt"), "--pred", str(root / "a"), "--pred",
            str(root / "b"), "--out", str(root / "out")]


@pytest.mark.parametrize("count", [1, 2, MIN_SAMPLES - 1])
def test_too_few_images_for_a_bootstrap_are_refused_before_any_work(tmp_path, capsys, count):
    code = main([*_folders(tmp_path, count), "--baseline", "a"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"sodkit eval: error: --ci: dataset {tmp_path.name} has {count} "
                              f"image"), err[-1]
    assert f"needs at least {MIN_SAMPLES}" in err[-1] and "leave out --ci" in err[-1]
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="at least"):  # the library says the same
        bootstrap({"m": _synthetic(np.random.default_rng(0), np.full(count, 0.1))})


def test_a_small_set_gets_a_warning_and_its_intervals(tmp_path, caplog):
    assert main([*_folders(tmp_path, MIN_SAMPLES + 2), "--ci", "--ci-resamples", "200"]) == 0
    assert f"has {MIN_SAMPLES + 2} images: its 95% intervals are approximate" in caplog.text
    assert json.loads((tmp_path / "out" / "ci.json").read_text())["images"] == MIN_SAMPLES + 2


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_interval_excludes_zero_exactly_when_p_is_below_its_level(level):
    """Over 150 data sets whose difference lies near the edge of significance, the two tests
    agree on every one (the count with + 1 disagreed on about one in ten)."""
    rng = np.random.default_rng(17)
    disagreements, near = [], 0
    for draw in range(150):
        a = rng.uniform(0.0, 0.2, 30)
        b = a + rng.normal(0.004, 0.01, 30)
        result = bootstrap({"A": _synthetic(rng, a), "B": _synthetic(rng, b)}, resamples=200,
                           seed=draw, level=level, baseline="A")["comparisons"]["B"]["MAE"]
        near += 0.2 * (1 - level) < result["p"] < 5 * (1 - level)
        if result["excludes_zero"] != (result["p"] < 1 - level):
            disagreements.append(result)
    assert near > 20  # the cases tried lie near the edge
    assert not disagreements, disagreements[:3]


def test_resampled_blocks_are_bounded_whatever_the_counts():
    """The weights and the averaged rows of one block hold at most CHUNK values each: with 10
    images and 2,300 columns the first block had 419,430 rows (7 GB of averaged rows)."""
    for images, width in ((10, 2300), (5000, 2300), (3, 40)):
        block = next(resample_weights(images, 10**6, 0, width))
        assert block.size <= CHUNK and len(block) * width <= CHUNK
        assert np.all(block.sum(axis=1) == images)


@pytest.mark.slow
def test_many_resamples_of_few_images_stay_within_a_memory_cap(tmp_path):
    """40,000 resamples of 10 images and 2 methods in a process that may grow by 512 MiB after
    its imports: it asked for 0.7 GB at once (MemoryError), now a few MB a block."""
    args = [*_folders(tmp_path, MIN_SAMPLES), "--baseline", "a", "--ci-resamples", "40000",
            "--curves", "pr"]
    done = run_capped(args, tmp_path, preload=("sodkit.commands.eval", "sodkit.metrics",
                                               "sodkit.report", "matplotlib.figure",
                                               "matplotlib.backends.backend_agg", "cv2"))
    assert done.returncode == 0, done.stderr[-2000:]
    ci = json.loads((tmp_path / "out" / "ci.json").read_text())
    assert ci["resamples"] == 40000 and ci["comparisons"]["b"]["MAE"]["p"] is not None
