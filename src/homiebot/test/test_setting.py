"""The benchmark setting as one switch: `--setting` of `homiebot run|up|tasks`, the node parameters it becomes, and
the record every experiment folder keeps of it."""

from __future__ import annotations

import json

import pytest

from homiebot import cli, setting
from homiebot.commands import up
from homiebot.run_config import RunnerConfig
from homiebot.runner import stack_overrides

NO_BACKGROUND = {"sim_stack": {"setting": "no_background", "perception": "learned"}, "homiebot_executor": {"routing": "model"}}


def parse(*argv: str):
    parser, _ = cli.build_parser()
    return parser.parse_args(list(argv))


def test_up_turns_the_setting_into_node_parameters_under_the_set_items():
    assert up.node_overrides(parse("up")) == {"sim_stack": {"setting": "background", "perception": "segmentation"}}
    assert up.node_overrides(parse("up", "--setting", "no_background")) == NO_BACKGROUND
    assert up.node_overrides(parse("up", "--setting", "no_background", "--set", "homiebot_executor.routing=strict",
                                   "--set", "planner.backend=mock")) == {
        "sim_stack": {"setting": "no_background", "perception": "learned"}, "homiebot_executor": {"routing": "strict"},
        "planner": {"backend": "mock"}}
    with pytest.raises(cli.UsageError, match="unknown node"):
        up.node_overrides(parse("up", "--set", "bridge.rate_hz=5"))


def test_run_passes_the_setting_to_the_stack(tmp_path):
    args = parse("run", "--out", str(tmp_path), "--setting", "no_background", "--set", "planner.max_steps=5")
    config = RunnerConfig(tasks=args.tasks, out=args.out, setting=args.setting, overrides=tuple(args.overrides))
    overrides = stack_overrides(config)
    assert {node: overrides[node] for node in NO_BACKGROUND} == NO_BACKGROUND
    assert overrides["planner"]["max_steps"] == "5"
    assert stack_overrides(RunnerConfig(tasks="test", out=tmp_path))["sim_stack"] == {"setting": "background", "perception": "segmentation"}
    assert parse("run", "--out", str(tmp_path)).setting == "background"


@pytest.mark.parametrize("command", [["run", "--out", "x"], ["up"], ["tasks", "check"]])
def test_an_unknown_setting_is_a_usage_error(command, capsys):
    with pytest.raises(SystemExit) as raised:
        parse(*command, "--setting", "sensor")
    assert raised.value.code == 2 and "invalid choice: 'sensor'" in capsys.readouterr().err


def test_tasks_check_replays_in_the_chosen_setting(monkeypatch):
    import homiebot.expert_check

    seen = []
    monkeypatch.setattr(homiebot.expert_check, "replay",
                        lambda definition, scene, backend, setting, perception: seen.append((setting, perception)) or [])
    assert cli.main(["tasks", "check", "--tasks", "91", "--setting", "no_background"]) == 0
    assert cli.main(["tasks", "check", "--tasks", "91", "--setting", "no_background", "--perception",
                     "segmentation"]) == 0
    assert seen == [("no_background", None), ("no_background", "segmentation")]


def test_the_setting_is_recorded_and_an_experiment_never_mixes_two(tmp_path):
    out = tmp_path / "exp"
    setting.record_setting(out, "no_background")
    recorded = json.loads((out / setting.SETTING_FILE).read_text())
    assert recorded["setting"] == "no_background" and recorded["perception"] == "learned"
    assert "trained on simulator renders" in recorded["detector"]
    assert "instance masks" in setting.describe("no_background", perception="segmentation")
    setting.record_setting(out, "no_background")  # a resume in the same setting
    with pytest.raises(setting.SettingMismatch, match="holds runs with setting no_background, not background"):
        setting.record_setting(out, "background")
    older = tmp_path / "older"  # scored before the switch existed: background runs
    (older / "91" / "1").mkdir(parents=True)
    (older / "91" / "1" / "score.json").write_text("{}")
    with pytest.raises(setting.SettingMismatch, match="setting background, not no_background"):
        setting.record_setting(older, "no_background")
    setting.record_setting(older, "background")
    assert json.loads((older / setting.SETTING_FILE).read_text())["setting"] == "background"


PAPER = {"sim_stack": {"fail": "table4"},
         "emmoe_monitor": {"check_order": "release", "hand_source": "inventory"},
         "homiebot_executor": {"check_order": "release", "hand_source": "inventory", "put_retries": "release"}}


def test_paper_conditions_become_node_parameters_between_the_setting_and_the_set_items(tmp_path):
    from homiebot.conditions import conditions_overrides, scoring_arguments

    assert conditions_overrides("reliable") == {} and scoring_arguments("reliable") == []
    assert conditions_overrides("paper") == PAPER
    assert scoring_arguments("paper") == ["--compat", "official", "--split", "all"]
    with pytest.raises(ValueError, match="conditions: expected one of reliable, paper"):
        conditions_overrides("harsh")
    args = parse("run", "--out", str(tmp_path), "--conditions", "paper", "--setting", "no_background",
                 "--set", "sim_stack.fail=execution:pick=0.2")
    overrides = stack_overrides(RunnerConfig(tasks=args.tasks, out=args.out, setting=args.setting,
                                             conditions=args.conditions, overrides=tuple(args.overrides)))
    assert overrides["sim_stack"] == {"setting": "no_background", "perception": "learned", "fail": "execution:pick=0.2"}
    assert overrides["homiebot_executor"] == {"routing": "model", **PAPER["homiebot_executor"]}
    assert overrides["emmoe_monitor"] == PAPER["emmoe_monitor"]
    assert parse("run", "--out", str(tmp_path)).conditions == "reliable"
    assert up.node_overrides(parse("up", "--conditions", "paper"))["emmoe_monitor"] == PAPER["emmoe_monitor"]
    assert parse("collect", "--conditions", "paper").conditions == "paper"


def test_the_conditions_are_recorded_and_never_mixed(tmp_path):
    out = tmp_path / "exp"
    setting.record_setting(out, "background", "paper")
    recorded = json.loads((out / setting.SETTING_FILE).read_text())
    assert recorded["conditions"] == "paper" and "Pick 55.0 %" in recorded["conditions_detail"]
    assert "conditions paper" in setting.describe("background", "paper")
    with pytest.raises(setting.SettingMismatch, match="holds runs with conditions paper, not reliable"):
        setting.record_setting(out, "background", "reliable")
    older = tmp_path / "older"  # recorded before the conditions existed: reliable skills
    older.mkdir()
    (older / setting.SETTING_FILE).write_text(json.dumps({"setting": "background"}))
    with pytest.raises(setting.SettingMismatch, match="conditions reliable, not paper"):
        setting.record_setting(older, "background", "paper")


def test_the_perception_defaults_by_setting_is_recorded_and_never_mixed(tmp_path):
    assert setting.perception_of("no_background") == "learned"
    assert setting.perception_of("background") == "segmentation"
    with pytest.raises(ValueError, match="perception: expected one of learned, segmentation"):
        setting.perception_of("no_background", "lidar")
    assert setting.setting_overrides("no_background", "segmentation")["sim_stack"] == {
        "setting": "no_background", "perception": "segmentation"}
    out = tmp_path / "exp"
    setting.record_setting(out, "no_background", perception="segmentation")
    with pytest.raises(setting.SettingMismatch, match="perception segmentation, not learned"):
        setting.record_setting(out, "no_background")
    older = tmp_path / "older"  # recorded before the perception existed: the segmentation stand-in
    older.mkdir()
    (older / setting.SETTING_FILE).write_text(json.dumps({"setting": "no_background"}))
    with pytest.raises(setting.SettingMismatch, match="perception segmentation, not learned"):
        setting.record_setting(older, "no_background", perception="learned")
    assert parse("run", "--out", str(tmp_path), "--perception", "segmentation").perception == "segmentation"
    assert parse("run", "--out", str(tmp_path)).perception is None
