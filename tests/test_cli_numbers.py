"""Numeric command-line options have ranges: a bad number is a usage error naming the option
(exit 2), never a traceback from inside the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from sodkit.cli import COMMANDS, build_command_parser, main, parse_args

ROOT = Path(__file__).resolve().parents[1]

# command line (without the bad option) -> (option, bad values, a good value)
CASES = [
    (["export", "--checkpoint", "c.pt", "--onnx", "m.onnx"], "--opset", ["9", "-1", "x"], "17"),
    (["predict", "--checkpoint", "c.pt", "--out", "o", "in"], "--batch-size",
     ["0", "-2", "1025", "1.5"], "8"),
    (["predict", "--checkpoint", "c.pt", "--out", "o", "in"], "--size", ["1", "4097"], "320"),
    (["predict", "--checkpoint", "c.pt", "--out", "o", "in"], "--workers", ["-1"], "0"),
    (["predict", "--checkpoint", "c.pt", "--out", "o", "in", "--save", "binary"], "--threshold",
     ["-0.1", "1.5", "nan", "inf", "half"], "0.3"),
    (["eval", "--gt", "g", "--pred", "p", "--out", "o"], "--workers", ["0", "-3"], "1"),
    (["eval", "--gt", "g", "--pred", "p", "--out", "o"], "--decimals", ["-1", "10"], "3"),
    (["report", "run", "--out", "r.html"], "--decimals", ["-1"], "0"),
    (["check-data", "c.yaml"], "--threads", ["-1"], "0"),
    (["bench", "speed", "c.yaml"], "--steps", ["0"], "1"),
    (["bench", "speed", "c.yaml"], "--rounds", ["0"], "2"),
]


@pytest.mark.parametrize(("argv", "option", "bad", "good"), CASES,
                         ids=[f"{c[0][0]} {c[1]}" for c in CASES])
def test_a_number_out_of_range_is_a_usage_error_naming_the_option(argv, option, bad, good,
                                                                   capsys):
    parse_args([*argv, option, good])
    for value in bad:
        with pytest.raises(SystemExit) as info:
            parse_args([*argv, option, value])
        assert info.value.code == 2
        said = capsys.readouterr().err.strip().splitlines()[-1]
        assert f"error: argument {option}: " in said and value in said, said


def test_every_numeric_option_has_a_range():
    """No command takes a bare ``type=int`` / ``float`` (which lets 0, -1 and 10**9 through)."""
    bare = [f"{name} {action.option_strings or action.dest}"
            for name in COMMANDS for action in build_command_parser(name)._actions
            if action.type in (int, float)]
    assert bare == []


def test_an_opset_newer_than_torch_supports_is_one_line(tmp_path, capsys):
    """The newest opset depends on the installed torch, so it is checked in the command, before
    the checkpoint is read."""
    (tmp_path / "never_read.pt").write_bytes(b"not a checkpoint")
    code = main(["export", "--checkpoint", str(tmp_path / "never_read.pt"), "--onnx",
                 str(tmp_path / "m.onnx"), "--opset", "999"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--opset 999: torch" in err[0], err
    assert [p.name for p in tmp_path.iterdir()] == ["never_read.pt"]
