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


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`homiebot ... | head -1` (issue 40): the flush at exit found the pipe closed and printed a BrokenPipeError;
    now the command ends with SIGPIPE's status, quietly. (A sub-command that prints a line, in a fresh process whose
    standard output is closed before it writes.)"""
    import subprocess
    import sys

    script = ("import sys, types\nfrom homiebot import cli\n"
              "say = types.SimpleNamespace(HELP='says', add_arguments=lambda parser: None,\n"
              "                            run=lambda args: print('scores') or 0)\n"
              "cli.command_modules = lambda: {'say': say}\nsys.exit(cli.main(['say']))\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert (process.wait(timeout=60), err) == (141, "")
