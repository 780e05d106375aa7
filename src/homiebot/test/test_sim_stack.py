"""Options of the composed simulation stack (homiebot.sim_stack)."""

from __future__ import annotations

import types

import pytest

from homiebot.sim_stack import OPTIONS, build_parser, parse_failures, parse_remotes, resolve_options


def test_stack_options():
    assert parse_failures("navigate=0.3, pick=0.5") == {"navigate": 0.3, "pick": 0.5}
    assert set(parse_failures("table4")) == {"navigate", "pick", "put", "open", "close"}
    assert parse_remotes(["rt1x=http://127.0.0.1:8000"]) == {"rt1x": "http://127.0.0.1:8000"}
    with pytest.raises(ValueError, match="--fail"):
        parse_failures("pick")
    with pytest.raises(ValueError, match="--remote"):
        parse_remotes(["m3=http://127.0.0.1:1"])


class _Parameters:
    """The `sim_stack` node's parameters as get_parameter answers them (defaults, a few replaced)."""

    def __init__(self, **values):
        self.values = {name: default for name, (_, default, _) in OPTIONS.items()} | values

    def get_parameter(self, name):
        return types.SimpleNamespace(value=self.values[name])


def test_the_setting_option_defaults_to_background_and_a_flag_wins():
    parser = build_parser()
    assert resolve_options(parser.parse_args([]), _Parameters())["setting"] == "background"
    assert resolve_options(parser.parse_args([]), _Parameters(setting="no_background"))["setting"] == "no_background"
    assert resolve_options(parser.parse_args(["--setting", "no_background"]), _Parameters(setting="background")
                           )["setting"] == "no_background"


def test_an_unknown_setting_is_refused_as_flag_and_as_parameter(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--setting", "sensor"])
    assert "invalid choice: 'sensor'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="setting: expected one of background, no_background, got 'sensor'"):
        resolve_options(build_parser().parse_args([]), _Parameters(setting="sensor"))
