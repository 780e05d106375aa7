"""The homiebot CLI: sub-command discovery, help, and user errors without tracebacks."""

from __future__ import annotations

import types

import pytest

from homiebot import cli


def test_doctor_is_discovered():
    parser, modules = cli.build_parser()
    assert "doctor" in modules
    assert parser.parse_args(["doctor", "--json"]).json is True


def test_no_command_prints_help_and_returns_2(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_usage_errors_are_one_line_with_status_2(monkeypatch, capsys):
    module = types.SimpleNamespace(
        HELP="fails", add_arguments=lambda parser: None,
        run=lambda args: (_ for _ in ()).throw(cli.UsageError("no such task: 999")),
    )
    monkeypatch.setattr(cli, "command_modules", lambda: {"broken": module})
    assert cli.main(["broken"]) == 2
    assert capsys.readouterr().err == "homiebot broken: error: no such task: 999\n"


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as raised:
        cli.main(["no-such-command"])
    assert raised.value.code == 2
