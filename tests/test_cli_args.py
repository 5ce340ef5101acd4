"""Every command takes its positionals (overrides, inputs) before and after its options."""

from __future__ import annotations

from pathlib import Path

import pytest

from sodkit.cli import COMMANDS, main, parse_args

ROOT = Path(__file__).resolve().parents[1]


def test_train_overrides_after_options():
    args = parse_args(["train", "configs/demo.yaml", "a.b=1", "--resume", "auto",
                       "train.epochs=3", "--overwrite", "name=x"])
    assert args.config == "configs/demo.yaml"
    assert args.overrides == ["a.b=1", "train.epochs=3", "name=x"]
    assert (args.resume, args.overwrite, args.command) == ("auto", True, "train")


def test_test_overrides_after_checkpoint():
    """The README's synopsis: ``sodkit test CONFIG --checkpoint PATH name=x``."""
    args = parse_args(["test", "configs/demo.yaml", "--checkpoint", "c.pt", "name=x"])
    assert (args.config, args.checkpoint, args.overrides) == ("configs/demo.yaml", "c.pt",
                                                               ["name=x"])
    args = parse_args(["test", "--checkpoint", "c.pt", "configs/demo.yaml", "name=x", "b=2"])
    assert (args.config, args.overrides) == ("configs/demo.yaml", ["name=x", "b=2"])


def test_predict_inputs_around_options():
    args = parse_args(["predict", "a.jpg", "--checkpoint", "c.pt", "dir1", "--out", "o",
                       "dir2", "--batch-size", "2"])
    assert args.inputs == ["a.jpg", "dir1", "dir2"]
    assert (args.checkpoint, args.out, args.batch_size) == ("c.pt", "o", 2)


def test_eval_options_in_any_order():
    args = parse_args(["eval", "--out", "o", "--pred", "m=p", "--gt", "g", "--pred", "n=q"])
    assert (args.gt, args.pred, args.out) == (["g"], ["m=p", "n=q"], "o")


def test_check_data_report_and_convert_take_positionals_around_options():
    args = parse_args(["check-data", "configs/demo.yaml", "--full", "data.size=64"])
    assert (args.config, args.overrides, args.full) == ("configs/demo.yaml", ["data.size=64"], True)
    args = parse_args(["report", "run1", "--out", "r.html", "run2"])
    assert (args.folders, args.out) == (["run1", "run2"], "r.html")
    args = parse_args(["convert-checkpoint", "a.pt", "b.pt"])
    assert args.checkpoints == ["a.pt", "b.pt"]


def test_every_command_is_covered():
    assert set(COMMANDS) == {"train", "test", "predict", "eval", "report", "check-data",
                             "bench", "info", "convert-checkpoint", "export", "import-weights",
                             "models", "serve"}


def test_predict_and_test_take_a_model_name_instead_of_a_checkpoint(capsys):
    args = parse_args(["predict", "--model", "birefnet-general", "--out", "o", "x.png"])
    assert (args.model, args.checkpoint) == ("birefnet-general", None)
    args = parse_args(["test", "configs/demo.yaml", "--model", "minet-r50", "name=x"])
    assert (args.model, args.overrides) == ("minet-r50", ["name=x"])
    args = parse_args(["models", "--fetch", "a", "b", "--json"])
    assert (args.fetch, args.json) == (["a", "b"], True)
    for argv in (["predict", "--out", "o", "x.png"],
                 ["predict", "--model", "m", "--checkpoint", "c.pt", "--out", "o", "x.png"]):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert "--checkpoint" in capsys.readouterr().err


def test_serve_takes_a_model_and_its_bounds():
    args = parse_args(["serve", "--model", "birefnet-general-lite", "--port", "0",
                       "--max-batch", "4", "--queue", "8", "--token", "t"])
    assert (args.model, args.host, args.port, args.max_batch, args.queue, args.token) == \
        ("birefnet-general-lite", "127.0.0.1", 0, 4, 8, "t")
    for argv in (["serve"], ["serve", "--checkpoint", "c.pt", "--port", "70000"],
                 ["serve", "--checkpoint", "c.pt", "--max-batch", "0"]):
        with pytest.raises(SystemExit):
            parse_args(argv)


def test_bench_and_info_overrides_after_options():
    args = parse_args(["bench", "memory", "configs/demo.yaml", "--steps", "2", "data.size=64"])
    assert (args.steps, args.overrides) == (2, ["data.size=64"])
    args = parse_args(["info", "configs/demo.yaml", "--json", "model.backbone=resnet34"])
    assert args.overrides == ["model.backbone=resnet34"]


@pytest.mark.parametrize("argv", [[], ["nope"], ["--version"]])
def test_top_level_usage_still_exits(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv)


def test_override_after_option_reaches_the_config(capsys):
    """A real run of the parsed command: a mistyped override after an option is still read."""
    assert main(["train", str(ROOT / "configs" / "demo.yaml"), "--overwrite", "train.epoch=3"]) == 2
    assert "train.epochs" in capsys.readouterr().err


def test_weights_tta_and_export_arguments():
    args = parse_args(["predict", "--checkpoint", "c.pt", "--out", "o", "x.png", "--tta", "hflip",
                       "--weights", "model"])
    assert (args.tta, args.weights) == (["hflip"], "model")
    assert parse_args(["predict", "--checkpoint", "c.pt", "--out", "o", "x.png"]).tta is None
    assert parse_args(["test", "configs/demo.yaml", "--checkpoint", "c.pt"]).weights == "auto"
    args = parse_args(["export", "--checkpoint", "c.pt", "--onnx", "m.onnx", "--size", "96", "128",
                       "--dynamic", "--opset", "18"])
    assert (args.size, args.dynamic, args.opset) == ([96, 128], True, 18)
