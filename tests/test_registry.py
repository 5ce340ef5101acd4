"""One registry mechanism (issue #34): every name a config, a command line or a catalogue picks is
looked up in a ``sodkit.registry.Registry``, and help texts and checks read the registry."""

from __future__ import annotations

import importlib

import pytest

from sodkit.registry import Registry


def test_registry_keeps_order_refuses_twice_and_suggests_the_closest_name():
    reg: Registry[int] = Registry("widget")
    reg.add("zeta", 1)
    reg.register("alpha")(2)
    assert list(reg) == ["zeta", "alpha"]  # registration order
    assert reg.names() == ["alpha", "zeta"]  # sorted, for messages
    assert dict(reg.items()) == {"zeta": 1, "alpha": 2} and len(reg) == 2
    with pytest.raises(ValueError, match="widget 'alpha' is registered twice"):
        reg.add("alpha", 3)
    with pytest.raises(KeyError, match=r"unknown widget 'alpah'; did you mean 'alpha'\? "
                                       r"\(registered: alpha, zeta\)"):
        reg.get("alpah")


@pytest.mark.parametrize("module, name", [
    ("sodkit.network", "NETWORKS"), ("sodkit.loss.terms", "LOSSES"),
    ("sodkit.data.presets", "PRESETS"), ("sodkit.metrics.families", "FAMILIES"),
    ("sodkit.published.formats", "FORMATS"), ("sodkit.inference.pipelines", "PIPELINES"),
    ("sodkit.cli", "COMMANDS"),
])
def test_every_name_table_is_one_registry(module, name):
    table = getattr(importlib.import_module(module), name)
    if name == "FORMATS":
        assert importlib.import_module(module).format_names()  # imports FORMAT_MODULES
    assert isinstance(table, Registry) and len(table) > 0


def test_eval_compute_help_lists_every_registered_family():
    import argparse

    from sodkit.commands import eval as eval_command
    from sodkit.metrics.families import FAMILIES

    parser = argparse.ArgumentParser()
    eval_command.add_arguments(parser)
    help_text = next(a.help for a in parser._actions if "--compute" in a.option_strings)
    assert all(name in help_text for name in FAMILIES)


def test_every_command_module_has_the_interface_the_cli_calls():
    from sodkit.cli import COMMANDS

    for name in COMMANDS:
        module = importlib.import_module(COMMANDS[name])
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.add_arguments) and callable(module.run)
