"""The stack description: command lines for `homiebot up` and the launch file, checked with stub launch modules."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest

from homiebot import bringup
from homiebot.bringup import EMMOE_SIM_NODES, NodeSpec

ROOT = Path(__file__).resolve().parents[3]


def test_every_node_executable_is_installed():
    for spec in EMMOE_SIM_NODES:
        path = bringup.executable_path(spec)
        assert path.is_file(), f"{spec.package} does not install {spec.executable}"


def test_node_command_renames_single_nodes_and_applies_overrides(tmp_path):
    params = tmp_path / "params.yaml"
    spec = NodeSpec("planner", "homiebot_planner", "planner_node", parameters={"max_steps": 20})
    argv = bringup.node_command(spec, params, {"backend": "mock", "verbose": True, "ids": [1, 2]})
    assert argv[0].endswith("lib/homiebot_planner/planner_node")
    assert argv[1:] == ["--ros-args", "-r", "__node:=planner", "--params-file", str(params),
                        "-p", "max_steps:=20", "-p", "backend:=mock", "-p", "verbose:=true", "-p", "ids:=[1,2]"]
    composed = bringup.node_command(NodeSpec("sim_stack", "homiebot", "sim_stack", single_node=False),
                                     params)
    assert "-r" not in composed


def test_overrides_parse_and_reject_malformed_items():
    assert bringup.parse_overrides(["planner.backend=mock", "planner.max_steps=5", "evaluator.out_dir=a=b"]) == {
        "planner": {"backend": "mock", "max_steps": "5"}, "evaluator": {"out_dir": "a=b"}}
    for bad in ("backend=mock", "planner.backend", ".x=1"):
        with pytest.raises(ValueError, match="NODE.PARAM=VALUE"):
            bringup.parse_overrides([bad])


def test_installed_config_covers_every_single_node_process():
    import yaml

    config = yaml.safe_load(bringup.config_path().read_text())
    for spec in EMMOE_SIM_NODES:
        assert "ros__parameters" in config[spec.name], spec.name


class _Recorded:
    """A stand-in for a launch action: remembers its constructor arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


def _stub_launch_modules(monkeypatch):
    modules = {name: types.ModuleType(name) for name in
               ("launch", "launch.actions", "launch.substitutions", "launch_ros", "launch_ros.actions")}
    modules["launch"].LaunchDescription = type("LaunchDescription", (_Recorded,), {})
    for name in ("DeclareLaunchArgument", "OpaqueFunction", "SetEnvironmentVariable"):
        setattr(modules["launch.actions"], name, type(name, (_Recorded,), {}))
    modules["launch.substitutions"].LaunchConfiguration = type("LaunchConfiguration", (_Recorded,), {})
    modules["launch_ros.actions"].Node = type("Node", (_Recorded,), {})
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("location", ["repository", "installed"])
@pytest.mark.parametrize("setting", ["background", "no_background"])
def test_launch_file_describes_the_same_stack(monkeypatch, location, setting):
    """`ros2 launch` itself cannot run here; the launch file is executed against stub launch modules."""
    _stub_launch_modules(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    path = (ROOT / "launch" if location == "repository" else bringup.share_directory() / "launch") / \
        "emmoe_sim.launch.py"
    module_spec = importlib.util.spec_from_file_location("emmoe_sim_launch", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    description = module.generate_launch_description()
    actions = description.args[0]
    settings = dict(action.args for action in actions if type(action).__name__ == "SetEnvironmentVariable")
    assert settings == bringup.stack_environment(None)
    assert settings["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    declared, chosen, opaque = actions[len(settings):]
    assert declared.args == ("config",) and declared.kwargs["default_value"] == str(bringup.config_path())
    assert chosen.args == ("setting",) and chosen.kwargs["default_value"] == "background"
    assert chosen.kwargs["choices"] == ["background", "no_background"]
    nodes = opaque.kwargs["function"](types.SimpleNamespace(launch_configurations={"setting": setting}))
    assert [(node.kwargs["package"], node.kwargs["executable"]) for node in nodes] == \
        [(spec.package, spec.executable) for spec in EMMOE_SIM_NODES]
    for node, spec in zip(nodes, EMMOE_SIM_NODES):
        assert node.kwargs.get("name") == (spec.name if spec.single_node else None)
        assert node.kwargs["parameters"][1] == dict(spec.parameters)
        assert node.kwargs["parameters"][2] == bringup.stack_parameters(setting, []).get(spec.name, {})
        if spec.name == "planner":
            assert "env" not in node.kwargs  # the launch environment, key included
        else:
            assert "OPENAI_API_KEY" not in node.kwargs["env"] and node.kwargs["env"]["PATH"] == os.environ["PATH"]
            assert node.kwargs["env"]["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"


@pytest.mark.parametrize("setting, items, expected", [
    ("background", [], {"sim_stack": {"setting": "background", "perception": "segmentation"}}),
    ("no_background", [], {"sim_stack": {"setting": "no_background", "perception": "learned"},
                           "homiebot_executor": {"routing": "model"}}),
    ("no_background", ["homiebot_executor.routing=background", "planner.backend=mock"],
     {"sim_stack": {"setting": "no_background", "perception": "learned"},
      "homiebot_executor": {"routing": "background"},
      "planner": {"backend": "mock"}}),
    ("no_background", ["sim_stack.backend=fetch"],
     {"sim_stack": {"setting": "no_background", "perception": "learned", "backend": "fetch"}, "homiebot_executor": {"routing": "model"},
      "planner": {"observation_timeout_s": bringup.FETCH_OBSERVATION_TIMEOUT_S}}),
    ("no_background", ["sim_stack.backend=fetch", "planner.observation_timeout_s=40"],
     {"sim_stack": {"setting": "no_background", "perception": "learned", "backend": "fetch"}, "homiebot_executor": {"routing": "model"},
      "planner": {"observation_timeout_s": "40"}}),
])
def test_the_setting_becomes_node_parameters_under_the_set_items(setting, items, expected):
    assert bringup.stack_parameters(setting, items) == expected


def test_an_unknown_setting_is_refused():
    with pytest.raises(ValueError, match="setting: expected one of background, no_background, got 'sensor'"):
        bringup.stack_parameters("sensor", [])


def test_stack_processes_get_the_loopback_dds_profile_unless_one_is_chosen(monkeypatch):
    from emmoe_core.dds_guard import discovery_problem, profile_problems

    for unset in (None, ""):
        if unset is None:
            monkeypatch.delenv(bringup.DDS_PROFILE_VARIABLE, raising=False)
        else:
            monkeypatch.setenv(bringup.DDS_PROFILE_VARIABLE, unset)
        environment = bringup.stack_environment(7)
        profile = Path(environment[bringup.DDS_PROFILE_VARIABLE])
        assert profile == bringup.dds_profile_path() and profile.is_file()
        assert environment["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
        assert profile_problems(profile, {}) == []
        assert discovery_problem({**environment, "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}) is None
    monkeypatch.setenv(bringup.DDS_PROFILE_VARIABLE, "/robot/lan_profile.xml")
    assert bringup.stack_environment(7)[bringup.DDS_PROFILE_VARIABLE] == "/robot/lan_profile.xml"


def test_only_the_planner_process_inherits_the_api_key_variable(tmp_path):
    specs = bringup.stack_process_specs(tmp_path / "params.yaml", {}, {"ROS_DOMAIN_ID": "7"}, label="a_")
    assert [spec.name for spec in specs] == [f"a_{spec.name}" for spec in EMMOE_SIM_NODES]
    assert {spec.name: spec.drop_env for spec in specs} == {
        f"a_{spec.name}": (() if spec.name == "planner" else ("OPENAI_API_KEY",)) for spec in EMMOE_SIM_NODES}
    renamed = bringup.stack_process_specs(tmp_path / "params.yaml", {"planner": {"openai_api_key_env": "MY_KEY"}}, {})
    assert {spec.drop_env for spec in renamed if spec.name != "planner"} == {("MY_KEY",)}


def test_up_gives_the_nodes_the_checkout_data_wherever_it_starts(monkeypatch, tmp_path):
    """Issue 40: the shipped emmoe_sim.yaml says `data_dir: data`, relative to where the nodes start: outside the
    repository root `homiebot up` lost its evaluator (it stops at once without its data). The data folder of the
    checkout goes to every node that reads one, unless --set gives it; a checkout without one is a usage error."""
    from homiebot.cli import UsageError, build_parser
    from homiebot.commands import up

    started: list[tuple[str, ...]] = []

    class Supervisor:
        def __init__(self, specs):
            started.extend(spec.argv for spec in specs)

        def start(self) -> None:
            pass

        def wait_for_any_exit(self):
            raise KeyboardInterrupt

        def stop(self) -> dict[str, int]:
            return {}

    monkeypatch.setattr("homiebot.supervisor.Supervisor", Supervisor)
    monkeypatch.setenv("HOMIEBOT_ROOT", str(ROOT))
    monkeypatch.chdir(tmp_path)
    parser, _ = build_parser()
    assert up.run(parser.parse_args(["up", "--set", "planner.data_dir=/elsewhere"])) == 0
    data_dirs = {argv[0].rsplit("/", 1)[-1]: [item for item in argv if item.startswith("data_dir:=")] for argv in started}
    assert data_dirs["evaluator_node"] == [f"data_dir:={ROOT / 'data'}"]
    assert data_dirs["planner_node"] == ["data_dir:=/elsewhere"]
    assert bringup.with_checkout_data({"planner": {"data_dir": "/elsewhere"}}) == {
        "planner": {"data_dir": "/elsewhere"}, "emmoe_evaluator": {"data_dir": str(ROOT / "data")}}
    monkeypatch.setenv("HOMIEBOT_ROOT", str(tmp_path))
    with pytest.raises(UsageError, match=rf"no data folder {tmp_path / 'data'} for the data_dir of emmoe_evaluator, "
                                         "planner; source env.sh"):
        up.run(parser.parse_args(["up"]))
