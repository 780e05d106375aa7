"""The node set of a HomieBot stack, shared by `launch/emmoe_sim.launch.py` and `homiebot up` / `homiebot run`.

One description, two starters: the launch file turns each `NodeSpec` into a launch_ros Node action
(for users with a full ROS 2 install), and `node_command` turns it into a plain command line for the
process supervisor (for installs without `ros2 launch`). Parameters come from the same YAML file in
both cases (config/emmoe_sim.yaml), with `key:=value` overrides on top: those of the benchmark setting
(`stack_parameters`), then the user's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from emmoe_core.dds_guard import PROFILE_VARIABLE, discovery_problem, loopback_environment
from emmoe_core.topics import EVALUATOR_NODE

from homiebot.conditions import DEFAULT_CONDITIONS, conditions_overrides
from homiebot.setting import STACK_NODE, setting_overrides
from homiebot.supervisor import ProcessSpec

CONFIG_FILE = "emmoe_sim.yaml"
DDS_PROFILE_FILE = "fastdds_loopback.xml"
DDS_PROFILE_VARIABLE = PROFILE_VARIABLE


@dataclass(frozen=True)
class NodeSpec:
    """One process of the stack.

    Attributes:
        name: Process label (and node name for single-node processes).
        package: ament package that installs the executable.
        executable: console script in lib/<package>/.
        single_node: True when the process holds one node, which is then renamed to `name`; composed processes
            (the simulator with its skill servers) keep their own node names.
        parameters: Per-process overrides, `parameter name -> value`, applied after the YAML file.
    """

    name: str
    package: str
    executable: str
    single_node: bool = True
    parameters: Mapping[str, object] = field(default_factory=dict)


EMMOE_SIM_NODES: tuple[NodeSpec, ...] = (
    NodeSpec("sim_stack", "homiebot", "sim_stack", single_node=False),
    NodeSpec("emmoe_monitor", "homiebot_executor", "monitor_node"),
    NodeSpec("homiebot_executor", "homiebot_executor", "executor_node"),
    NodeSpec("emmoe_evaluator", "emmoe_eval", "evaluator_node"),
    NodeSpec("planner", "homiebot_planner", "planner_node"),
)
PLANNER_NODE = "planner"
# The nodes that read the EMMOE data folder (parameter data_dir).
DATA_NODES: tuple[str, ...] = (EVALUATOR_NODE, PLANNER_NODE)
# A real robot takes the planner's four views by turning its base a full circle at its speed limit (and the fake
# Fetch in CI shares two cores with the stack): an observation takes tens of seconds, not the simulator's one.
FETCH_OBSERVATION_TIMEOUT_S = 90.0
API_KEY_PARAMETER = "openai_api_key_env"


def share_directory() -> Path:
    """The installed share/homiebot directory (launch and config files)."""
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("homiebot"))


def config_path(name: str = CONFIG_FILE) -> Path:
    """A parameter file installed with the homiebot package."""
    return share_directory() / "config" / name


def executable_path(spec: NodeSpec) -> Path:
    """Where colcon installed the node's console script."""
    from ament_index_python.packages import get_package_prefix

    return Path(get_package_prefix(spec.package)) / "lib" / spec.package / spec.executable


def format_parameter(value: object) -> str:
    """A value as ROS `-p name:=value` text (YAML scalars; lists in brackets)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_parameter(item) for item in value) + "]"
    return str(value)


def node_command(spec: NodeSpec, params_file: Path, overrides: Mapping[str, object] | None = None) -> list[str]:
    """The command line that starts `spec` with the parameter file and overrides, as `ros2 run` would."""
    argv = [str(executable_path(spec)), "--ros-args"]
    if spec.single_node:
        argv += ["-r", f"__node:={spec.name}"]
    argv += ["--params-file", str(params_file)]
    for key, value in {**spec.parameters, **(overrides or {})}.items():
        argv += ["-p", f"{key}:={format_parameter(value)}"]
    return argv


def parse_overrides(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """`node.param=value` strings -> {node: {param: value}}.

    Raises:
        ValueError: for an item without `node.` or `=`.
    """
    parsed: dict[str, dict[str, str]] = {}
    for item in items:
        key, separator, value = item.partition("=")
        node, dot, parameter = key.partition(".")
        if not separator or not dot or not node or not parameter:
            raise ValueError(f"expected NODE.PARAM=VALUE, got {item!r}")
        parsed.setdefault(node, {})[parameter] = value
    return parsed


def stack_parameters(setting: str, items: Sequence[str], conditions: str = DEFAULT_CONDITIONS,
                     perception: str | None = None) -> dict[str, dict[str, object]]:
    """The per-node overrides of a benchmark setting and its perception (homiebot.setting), then of the conditions
    (homiebot.conditions), `NODE.PARAM=VALUE` items on top. With `sim_stack.backend=fetch` the planner waits
    FETCH_OBSERVATION_TIMEOUT_S for an observation unless an item says otherwise.

    Raises:
        ValueError: an unknown setting or conditions, or a malformed item.
    """
    parameters = setting_overrides(setting, perception)
    for node, values in conditions_overrides(conditions).items():
        parameters.setdefault(node, {}).update(values)
    for node, values in parse_overrides(items).items():
        parameters.setdefault(node, {}).update(values)
    if parameters.get(STACK_NODE, {}).get("backend") == "fetch":
        parameters.setdefault(PLANNER_NODE, {}).setdefault("observation_timeout_s", FETCH_OBSERVATION_TIMEOUT_S)
    return parameters


def with_checkout_data(overrides: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, object]]:
    """`overrides` plus, for each node that reads the EMMOE data and is not given a `data_dir`, this checkout's data
    folder (`$HOMIEBOT_ROOT/data`; env.sh sets the root, else the current folder): the shipped emmoe_sim.yaml's
    `data_dir: data` is relative to wherever the nodes start, and outside the repository root the evaluator would
    stop at once and the planner find no task.

    Raises:
        ValueError: that folder does not exist.
    """
    data = Path(os.environ.get("HOMIEBOT_ROOT", ".")).resolve() / "data"
    result = {node: dict(values) for node, values in overrides.items()}
    needing = [node for node in DATA_NODES if "data_dir" not in result.get(node, {})]
    if needing and not data.is_dir():
        raise ValueError(f"no data folder {data} for the data_dir of {', '.join(needing)}; source env.sh (it sets "
                         f"HOMIEBOT_ROOT), start from the repository root, or --set {needing[0]}.data_dir=DATA_DIR")
    for node in needing:
        result.setdefault(node, {})["data_dir"] = str(data)
    return result


def dds_profile_path() -> Path:
    """The Fast DDS profile every node uses unless FASTDDS_DEFAULT_PROFILES_FILE says otherwise (loopback sockets)."""
    return config_path(DDS_PROFILE_FILE)


def stack_environment(domain_id: int | None) -> dict[str, str]:
    """Environment of every stack process: discovery and DDS sockets on this machine, optionally a given domain.

    ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT with the Fast DDS profile FASTDDS_DEFAULT_PROFILES_FILE names (a
    robot-LAN profile, docs/deployment.md), else the loopback profile: rmw_fastrtps applies it untouched, so every
    DDS socket is bound to 127.0.0.1. Each node checks the result before it starts (emmoe_core.dds_guard).
    """
    environment = loopback_environment(os.environ.get(DDS_PROFILE_VARIABLE, "").strip() or dds_profile_path())
    if domain_id is not None:
        environment["ROS_DOMAIN_ID"] = str(domain_id)
    elif "ROS_DOMAIN_ID" in os.environ:
        environment["ROS_DOMAIN_ID"] = os.environ["ROS_DOMAIN_ID"]
    return environment


def require_loopback_stack(error: type[Exception]) -> None:
    """Raise `error` with the DDS guard's message (emmoe_core.dds_guard) unless this process's client node and the
    nodes of a stack it starts (stack_environment) may start."""
    for environ in (os.environ, {**os.environ, **stack_environment(None)}):
        problem = discovery_problem(environ)
        if problem is not None:
            raise error(problem)


def secret_variables(overrides: Mapping[str, Mapping[str, object]]) -> tuple[str, ...]:
    """The environment variable holding the planner's API key (its `openai_api_key_env` override or the default)."""
    from homiebot_planner.settings import PlannerParameters

    default = PlannerParameters().openai_api_key_env
    return (str(overrides.get(PLANNER_NODE, {}).get(API_KEY_PARAMETER, default)),)


def dropped_variables(node_name: str, overrides: Mapping[str, Mapping[str, object]]) -> tuple[str, ...]:
    """The environment variables process `node_name` must not inherit: the API key variable, unless it is the
    planner (no other node needs the key, so no other node can leak it)."""
    return () if node_name == PLANNER_NODE else secret_variables(overrides)


def stack_process_specs(params_file: Path, overrides: Mapping[str, Mapping[str, object]],
                        environment: Mapping[str, str], label: str = "") -> list[ProcessSpec]:
    """The supervisor's processes of the stack, `label` before each name (see `dropped_variables`)."""
    return [ProcessSpec(f"{label}{spec.name}", tuple(node_command(spec, params_file, overrides.get(spec.name))),
                        environment, drop_env=dropped_variables(spec.name, overrides))
            for spec in EMMOE_SIM_NODES]
