"""A folder evaluation from Python, without argparse (:mod:`sodkit.evaluation`): the same files
and numbers as ``sodkit eval``, the numbers returned, the request left as it was given, and a
bad value refused in one line as the command's option parser refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from sodkit.cli import main
from sodkit.errors import UserError
from sodkit.evaluation import EvalRequest, evaluate_folders
from sodkit.metrics.testing import realistic_pair


@pytest.fixture()
def folders(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    for i in range(10):
        pred, gt = realistic_pair(rng, 40, 52)
        for name, image in (("gt", gt), ("a", pred), ("b", 255 - pred)):
            (tmp_path / name).mkdir(exist_ok=True)
            assert cv2.imwrite(str(tmp_path / name / f"im{i}.png"), image)
    return tmp_path


def test_an_evaluation_from_python_equals_the_command(folders: Path, capsys) -> None:
    request = EvalRequest(gt=[str(folders / "gt")], pred=[str(folders / "a"),
                                                         f"minus={folders / 'b'}"],
                          out=folders / "py", ci=True, baseline="a", ci_resamples=200)
    tables = evaluate_folders(request)
    assert capsys.readouterr().out == ""  # nothing printed unless asked (show=print)
    assert request.gt == [str(folders / "gt")] and request.gt_namings == {}  # untouched
    assert main(["eval", "--gt", str(folders / "gt"), "--pred", str(folders / "a"), "--pred",
                 f"minus={folders / 'b'}", "--out", str(folders / "cli"), "--ci", "--baseline",
                 "a", "--ci-resamples", "200"]) == 0
    assert "| method |" in capsys.readouterr().out  # the command prints its tables
    for name in ("results.json", "results.csv", "curves.json", "ci.json", "pr.png"):
        assert (folders / "py" / name).read_bytes() == (folders / "cli" / name).read_bytes(), \
            name
    written = json.loads((folders / "py" / "results.json").read_text())
    (dataset, table), = tables.items()  # named after the GT folder (or the one above)
    assert set(table) == {"a", "minus"} and table["a"]["MAE"] < table["minus"]["MAE"]
    for method, values in table.items():
        assert values == pytest.approx(written[method], nan_ok=True), method
    evaluate_folders(request)  # the same request again: its lists were not added to


@pytest.mark.parametrize(("field", "value", "said"), [
    ("workers", 0, "workers: must be >= 1, got 0"),
    ("ci_resamples", 5, "ci_resamples: must be in [100, 1000000], got 5"),
    ("curves", ("pr", "roc"), "curves: 'pr,roc': choose from"),
    ("include_methods", "a", "include_methods: expected a list of names"),
    ("out", "", "out: name the folder for the results"),
])
def test_a_bad_value_is_refused_in_one_line(field: str, value: object, said: str) -> None:
    with pytest.raises(UserError) as refused:
        EvalRequest(**{"gt": ["gt"], "pred": ["a"], "out": "out", field: value})
    assert str(refused.value).startswith(said), refused.value
