"""Options of the composed simulation stack (homiebot.sim_stack)."""

from __future__ import annotations

import pytest

from homiebot.sim_stack import StackOptions, build_parser, parse_failures, parse_remotes, resolve_options


def test_stack_options():
    per_attempt = parse_failures("navigate=0.3, pick=0.5", seed=4)
    assert (dict(per_attempt.probabilities), per_attempt.unit, per_attempt.seed) == (
        {"navigate": 0.3, "pick": 0.5}, "attempt", 4)
    per_execution = parse_failures("execution:open=0.2")
    assert (dict(per_execution.probabilities), per_execution.unit) == ({"open": 0.2}, "execution")
    paper = parse_failures("table4", put_drop=0.5)
    assert set(paper.probabilities) == {"navigate", "pick", "put", "open", "close"}
    assert (paper.unit, paper.put_drop_probability) == ("execution", 0.5)
    assert paper.probabilities["pick"] == pytest.approx(1 - 0.55, abs=0.001)
    assert not parse_failures("").enabled
    assert parse_remotes(["rt1x=http://127.0.0.1:8000"]) == {"rt1x": "http://127.0.0.1:8000"}
    with pytest.raises(ValueError, match="--fail"):
        parse_failures("pick")
    with pytest.raises(ValueError, match="--remote"):
        parse_remotes(["m3=http://127.0.0.1:1"])


def test_the_setting_option_defaults_to_background_and_a_flag_wins():
    parser = build_parser()
    assert resolve_options(parser.parse_args([]), StackOptions()).setting == "background"
    assert resolve_options(parser.parse_args([]), StackOptions(setting="no_background")).setting == "no_background"
    assert resolve_options(parser.parse_args(["--setting", "no_background"]), StackOptions(setting="background")
                           ).setting == "no_background"


def test_every_option_is_a_flag_and_flags_win_over_parameters():
    parser = build_parser()
    flags = ["--backend", "habitat", "--fetch-dry-run", "--fetch-joint-speed", "1.25", "--seed", "3",
             "--remote", "rt1x=http://127.0.0.1:8000", "--camera-rate-hz", "0"]
    options = resolve_options(parser.parse_args(flags), StackOptions(seed=7, remote=("", "octo=http://x")))
    assert (options.backend, options.fetch_dry_run, options.fetch_joint_speed, options.seed, options.remote,
            options.camera_rate_hz) == ("habitat", True, 1.25, 3, ("rt1x=http://127.0.0.1:8000",), 0.0)
    # Without flags the parameters hold, the placeholder blank entry of an empty list dropped.
    assert resolve_options(parser.parse_args([]), StackOptions(seed=7, remote=("",))) == StackOptions(seed=7)


def test_an_unknown_setting_is_refused_as_flag_and_as_parameter(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--setting", "sensor"])
    assert "invalid choice: 'sensor'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="setting: expected one of background, no_background, got 'sensor'"):
        StackOptions(setting="sensor")  # the `sim_stack` node's parameter
