"""Every numeric config key has a range, and NaN, infinity and out-of-range values are config
errors naming the key (exit 2 before any work), wherever the config comes from."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from sodkit.config import Config, ConfigError, load_config
from sodkit.config.ranges import RANGE, Range, numeric_keys

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "configs" / "demo.yaml")
KEYS = numeric_keys(Config)


def _is_list(key: str) -> bool:
    value = _default(key)
    return isinstance(value, list) or key in ("model.out_indices", "loss.aux_weights")


def _default(key: str) -> Any:
    node: Any = Config()
    for part in key.split("."):
        node = getattr(node, part)
    return node


def _out_of_range(rule: Range, is_int: bool) -> list[Any]:
    """A value just outside each bound the rule has."""
    step = 1 if is_int else 0.5
    bad = []
    if rule.low is not None:
        bad.append(rule.low if rule.low_open else rule.low - step)
    if rule.high is not None:
        bad.append(rule.high if rule.high_open else rule.high + step)
    return bad


def _bad_values(key: str) -> list[Any]:
    field = KEYS[key]
    rule = field.metadata[RANGE]
    is_int = "int" in str(field.type)
    values: list[Any] = [float("nan"), float("inf"), float("-inf"),
                         *_out_of_range(rule, is_int)]
    if not _is_list(key):
        return values
    start = list(_default(key) or [])
    if not start:
        start = [rule.low if rule.low is not None and not rule.low_open else 1]
    lists = [start[:-1] + [v] for v in values]
    if rule.length is not None:
        lists.append(start + start[:1])  # one value too many
    return lists


def _yaml(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, float) and value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return repr(value)


CASES = [(key, _yaml(value)) for key in KEYS for value in _bad_values(key)]


def test_every_numeric_key_has_a_range_and_its_default_is_inside() -> None:
    """A new numeric key without ``ranged(...)`` fails here; so would a default outside."""
    assert len(KEYS) >= 50  # the walk found the sections' fields, not just the top level
    assert {"data.std", "optim.betas", "runtime.seed", "loss.aux_weights"} <= set(KEYS)
    missing = [key for key, field in KEYS.items() if RANGE not in field.metadata]
    assert missing == []
    load_config(None, [])  # every default passes its own range


@pytest.mark.parametrize(("key", "text"), CASES, ids=[f"{k}={t}" for k, t in CASES])
def test_a_bad_numeric_value_is_a_config_error_naming_the_key(key: str, text: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={text}"])
    message = str(info.value)
    assert message.startswith(key) and "\n" not in message, message


@pytest.mark.parametrize(("override", "said"), [
    ("optim.lr=.nan", "optim.lr: must be a finite number > 0, got nan"),
    ("optim.backbone_lr_factor=-1", "optim.backbone_lr_factor: must be >= 0, got -1.0"),
    ("optim.momentum=-1", "optim.momentum: must be in [0, 1), got -1.0"),
    ("optim.betas=[2, 0.999]", "optim.betas.0: must be in [0, 1), got 2.0"),
    ("optim.betas=[0.9]", "optim.betas: must hold 2 values"),
    ("runtime.num_threads=-3", "runtime.num_threads: must be > 0, got -3"),
    ("data.size=1", "data.size: must be in [16, 4096], got 1"),
    ("data.std=[.nan, 0.2, 0.2]", "data.std.0: must be a finite number in (0, 1], got nan"),
    ("data.mean=[124, 117, 104]", "data.mean.0: must be in [0, 1], got 124.0"),
    ("train.checkpoint_minutes=.inf", "train.checkpoint_minutes: must be a finite number >= 0"),
    ("data.rotation=.nan", "data.rotation: must be a finite number in [0, 180]"),
    ("optim.weight_decay=.nan", "optim.weight_decay: must be a finite number >= 0"),
])
def test_the_message_names_the_key_and_the_range(override: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(DEMO, [override])
    assert str(info.value).startswith(said), str(info.value)


@pytest.mark.parametrize(("overrides", "said"), [
    (["train.epochs=2", "schedule.warmup_epochs=3"], "schedule.warmup_epochs: 3.0 is longer"),
    (["optim.name=sgd", "optim.nesterov=true", "optim.momentum=0"],
     "optim.nesterov: needs optim.momentum > 0")])
def test_keys_that_contradict_each_other_are_config_errors(overrides, said) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(DEMO, overrides)
    assert str(info.value).startswith(said), str(info.value)


def test_configs_built_from_a_dict_are_checked_too() -> None:
    """A checkpoint's stored config goes through ``from_dict``, which checks the ranges."""
    from sodkit.config import from_dict, to_dict

    raw = to_dict(Config())
    raw["data"]["std"] = [float("nan"), 0.2, 0.2]
    with pytest.raises(ConfigError, match=r"data\.std\.0: must be a finite number"):
        from_dict(Config, raw, prefix="")


def test_sections_built_in_code_are_checked_by_their_users() -> None:
    from sodkit.config import LossCfg, ModelCfg, ScheduleCfg
    from sodkit.loss import build_criterion
    from sodkit.network import build_network
    from sodkit.optim import lr_factor_fn

    with pytest.raises(ConfigError, match="loss.aux_weight: must be a finite number"):
        build_criterion(LossCfg(aux_weight=float("nan")))
    with pytest.raises(ConfigError, match="loss.terms.bce: must be a finite number"):
        build_criterion(LossCfg(terms={"bce": float("nan")}))
    with pytest.raises(ConfigError, match="loss.terms.ssim.weight: must be >= 0"):
        build_criterion(LossCfg(terms={"ssim": {"weight": -1}}))
    with pytest.raises(ConfigError, match="schedule.power: must be a finite number > 0"):
        lr_factor_fn(ScheduleCfg(power=float("inf")), 10, 2)
    with pytest.raises(ConfigError, match="model.decoder_channels: must be > 0"):
        build_network(dataclasses.replace(ModelCfg(), decoder_channels=0))


def test_aux_weights_must_give_one_weight_per_side_output() -> None:
    """Checked against the built network before training, not at the first step."""
    from sodkit.loss import build_criterion
    from sodkit.network import build_network

    for name, sides in (("fpn", 3), ("minet", 4), ("f3net", 5)):  # minet: ResNet strides 2-32
        cfg = load_config(DEMO, [f"model.name={name}", "loss.aux_weights=[1, 1]"])
        net = build_network(cfg.model)
        assert net.side_outputs == sides
        with pytest.raises(ConfigError, match=f"has 2 weights but .* returns {sides} side"):
            build_criterion(cfg.loss, net)
        build_criterion(dataclasses.replace(cfg.loss, aux_weights=[0.5] * sides), net)


def test_aux_weights_all_zero_train_without_side_outputs() -> None:
    """All-zero weights switch side outputs off; the criterion then expects none."""
    import torch

    from sodkit.loss import build_criterion
    from sodkit.network import build_network

    cfg = load_config(DEMO, ["loss.aux_weights=[0, 0, 0]"])
    net = build_network(cfg.model, aux_outputs=cfg.loss.uses_aux)
    outputs = net(torch.rand(2, 3, 32, 32))
    assert outputs["aux"] == []
    total, parts = build_criterion(cfg.loss, net)(outputs, torch.rand(2, 1, 32, 32))
    assert torch.isfinite(total) and "aux" not in parts


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_bad_values_end_the_command_in_one_line_before_any_work(tmp_path: Path,
                                                                run_cli) -> None:
    """The issue's examples through ``sodkit train``: exit 2, one line naming the key, and not a
    file written (no run folder, nothing else)."""
    (tmp_path / "keep.txt").write_text("mine")
    before = _tree(tmp_path)
    for override, key in (("optim.lr=nan", "optim.lr"), ("data.size=1", "data.size"),
                          ("optim.betas=[2, 0.999]", "optim.betas.0")):
        proc = run_cli("train", DEMO, override, f"output_root={tmp_path / 'runs'}",
                       cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert lines[0].startswith(f"sodkit train: error: {key}: must be"), lines[0]
    assert _tree(tmp_path) == before


def test_the_readme_shows_every_range() -> None:
    """The README's table of ranges is the schema's, key for key."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| section | numeric keys: allowed values"):]
    for key, field in KEYS.items():
        section, name = key.split(".", 1)
        rule = field.metadata[RANGE]
        row = next(line for line in table.splitlines() if line.startswith(f"| `{section}` | `"))
        assert f"`{name}` {rule.text()}" in row, key
