"""The simulation stack in one process: a simulator backend (MuJoCo by default, `--backend habitat`), the
habitat_bridge node and the five skill servers.

It lives in the bringup package because it composes two packages that do not know each other: habitat_bridge (the
backend and bridge node) and homiebot_executor (the skill servers, which drive the backend only through the
robot/skill interface of emmoe_core.robot).

Standard ROS 2 composition: several nodes, one MultiThreadedExecutor, one process, so the privileged (M3) skills
call the backend object directly while every interface stays a real ROS one (/sim/* services from the bridge,
/skills/<server>/navigate|manipulate actions). The skills use the bridge's public in-process access
(habitat_bridge.bridge_node): every skill runs inside `bridge.paused()` (the free-running simulation stops while the
skill steps the simulator in simulated time) and holds `bridge.exclusive()` around each backend call, so the bridge
serves /sim/query_scene (the monitor's watch) and observations between control steps.

`--setting` picks what the servers run (homiebot.setting). In `background` (the default) each runs the privileged
M3 skills. In `no_background` the nomad, pixnav, rt1x and octo servers share one sensor-only policy
(homiebot_executor.policies.sensor on a habitat_bridge.sensor_only view of the backend; objects are found by
`--perception`: the learned detector on colour and depth by default, or the simulator's instance segmentation as a
stand-in, which also gives the text planners' "Visible objects") and m3 refuses every goal
(PRIVILEGED_REFUSED). Either way `--remote SERVER=URL` points a model's server at a policy server speaking
homiebot-policy/1. An optional seeded failure model (homiebot_executor.failure_model) makes skills fail: `--fail
table4` draws each execution at the per-execution success rates behind the paper's Table 4 (what `homiebot run
--conditions paper` sets), `--fail navigate=0.3,pick=0.5` fails each attempt with the given probability, and
`--fail execution:navigate=0.1` each execution.

    python -m homiebot.sim_stack --seed 3            # generated apartment, seed 3
    python -m homiebot.sim_stack --scene my_scene.json --fail table4 --fail-seed 7
    python -m homiebot.sim_stack --setting no_background   # sensor-only skills (the executor needs routing=model)
    sim_stack --ros-args --params-file emmoe_sim.yaml         # the same options as parameters of node `sim_stack`
Every option is also a ROS parameter of the `sim_stack` node (a flag given on the command line wins); the bridge
node reads its other parameters (image_size, publish_depth, cmd_vel_timeout) from the parameter file as usual.
Prints "homiebot sim stack ready" once everything serves.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from emmoe_core.perception import create_detector
from homiebot_executor.failure_model import FailureConfig, FailureModel
from homiebot_executor.remote.client import ClientConfig, PolicyClient
from homiebot_executor.routing import SERVER_OF_MODEL, SERVERS
from homiebot_executor.skill_servers import RefusingPolicy, RobotClaim, SkillServerNode
from rclpy.parameter import Parameter

from homiebot.setting import SETTINGS, describe, perception_of

READY_LINE = "homiebot sim stack ready"
# What the sensor-only skills look through on a Fetch: its one head camera.
FETCH_SKILL_VIEWS: tuple[str, ...] = ("front",)
MODEL_OF_SERVER = {server: model for model, server in SERVER_OF_MODEL.items()}
M3_REFUSAL = ("M3 uses background information; in the no_background setting each skill runs on the server of the "
              "model the planner chose")


def parse_failures(text: str, put_drop: float = 0.0, seed: int = 0) -> FailureConfig:
    """The failure model of `--fail`: "" (none), "table4" (the paper's skills, per execution), "skill=p,..." (per
    attempt) or "execution:skill=p,..." (per execution).

    Raises:
        ValueError: a malformed entry, an unknown skill or a probability outside [0, 1].
    """
    text = text.strip()
    if text == "table4":
        return FailureConfig.paper(seed, put_drop)
    unit, entries = ("execution", text.removeprefix("execution:")) if text.startswith("execution:") else \
        ("attempt", text)
    probabilities = {}
    for entry in filter(None, (item.strip() for item in entries.split(","))):
        skill, _, value = entry.partition("=")
        try:
            probabilities[skill.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--fail: expected table4, skill=probability,... or execution:skill=probability,...; "
                             f"got {entry!r}") from None
    return FailureConfig(probabilities, put_drop, seed, unit)


def parse_remotes(entries: Sequence[str]) -> dict[str, str]:
    """["rt1x=http://127.0.0.1:8000", ...] -> {server: url}.

    Raises:
        ValueError: an unknown server or a missing URL.
    """
    remotes = {}
    for entry in entries:
        server, _, url = entry.partition("=")
        if server not in SERVERS or server == "m3" or not url:
            raise ValueError(f"--remote: expected SERVER=URL with SERVER one of nomad, pixnav, rt1x, octo; got "
                             f"{entry!r}")
        remotes[server] = url
    return remotes


# The metadata key of a StackOptions field holding its flag's help text.
HELP = "help"


def _option(default: Any, text: str) -> Any:
    """A field of StackOptions: its default and the help text of its flag."""
    return field(default=default, metadata={HELP: text})


@dataclass(frozen=True)
class StackOptions:
    """Options of the stack: each a command-line flag (`--fetch-joint-speed` for fetch_joint_speed) and a ROS
    parameter of the `sim_stack` node (bringup YAML, `--set sim_stack.NAME=VALUE`); a flag given wins.

    Raises:
        ValueError: an unknown setting.
    """

    setting: str = _option("background", "benchmark setting: background (privileged M3 skills) or no_background "
                           "(sensor-only skills)")
    perception: str = _option("", "how objects are found: learned (the detector trained on simulator renders) or "
                              "segmentation (the simulator's instance masks); empty: the setting's default (learned in "
                              "no_background, segmentation in background). With the fetch backend the robot's detector "
                              "node finds them (the fake Fetch's --perception)")
    backend: str = _option("mujoco", "simulator backend: mujoco, habitat or auto (habitat when it imports), or fetch "
                           "(a real Fetch, or the fake one, through its ROS interfaces; needs --setting "
                           "no_background)")
    fetch_dry_run: bool = _option(False, "fetch backend: compute and log every command, send none")
    fetch_joint_speed: float = _option(0.5, "fetch backend: joint speed limit of arm, torso and head (rad/s; the "
                                       "skills move the arm no faster; 1.25 is the Fetch's slowest arm joint)")
    fetch_views_by: str = _option("base", "fetch backend: take the four planner views by turning the base (as the "
                                  "release did) or panning the head (head)")
    scene: str = _option("", "scene spec file (JSON/YAML) or official EMMOE scene.json")
    seed: int = _option(0, "seed of the generated apartment (without a scene) or the compact kitchen")
    compact: bool = _option(False, "the small test kitchen instead of the apartment")
    fail: str = _option("", "failure model: table4 (the paper's skills, per execution), skill=p,... (per attempt) or "
                        "execution:skill=p,...")
    fail_seed: int = _option(0, "seed of the failure model")
    put_drop: float = _option(0.0, "probability that a failing Put drops the object")
    remote: tuple[str, ...] = _option((), "SERVER=URL: run SERVER (nomad, pixnav, rt1x, octo) on a homiebot-policy/1 "
                                      "server")
    remote_timeout: float = _option(5.0, "seconds per policy request")
    rate_hz: float = _option(50.0, "bridge control rate")
    camera_rate_hz: float = _option(2.0, "bridge camera publishing rate")

    def __post_init__(self) -> None:
        perception_of(self.setting, self.perception or None)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the stack (each also a ROS parameter of the `sim_stack` node)."""
    parser = argparse.ArgumentParser(prog="sim_stack", description=__doc__.split("\n")[0])
    for option in fields(StackOptions):
        flag, text = f"--{option.name.replace('_', '-')}", option.metadata[HELP]
        if isinstance(option.default, bool):
            parser.add_argument(flag, action="store_const", const=True, default=None, help=text)
        elif isinstance(option.default, tuple):
            parser.add_argument(flag, action="append", default=None, metavar="SERVER=URL", help=text)
        else:
            parser.add_argument(flag, type=type(option.default), default=None, help=text,
                                choices=SETTINGS if option.name == "setting" else None)
    return parser


def resolve_options(cli: argparse.Namespace, parameters: StackOptions) -> StackOptions:
    """Command-line values where given, else the `sim_stack` node's ROS parameters (defaults included; the blank
    `remote` entries a parameter file needs to write an empty list dropped).

    Raises:
        ValueError: an unknown setting.
    """
    given = {option.name: getattr(cli, option.name) for option in fields(StackOptions)
             if getattr(cli, option.name) is not None}
    if "remote" in given:
        given["remote"] = tuple(given["remote"])
    return replace(parameters, **{"remote": tuple(item for item in parameters.remote if item), **given})


def build_nodes(options: StackOptions, scene_path: str, **node_kwargs: Any) -> list[Any]:
    """The bridge node and one skill server per model, sharing the bridge's backend (see the module docstring);
    `node_kwargs` (a context, say) go to every node.

    Raises:
        ValueError: a malformed option.
    """
    from habitat_bridge.backends import create_backend, resolve_backend_name
    from habitat_bridge.bridge_node import BridgeNode
    from habitat_bridge.sensor_only import SensorOnlyRobot
    from homiebot_executor.policies.m3 import PrivilegedSkills
    from homiebot_executor.policies.remote import RemotePolicy
    from homiebot_executor.policies.sensor import SensorSkills
    from homiebot_executor.policies.sensor.context import SensorConfig

    failures = parse_failures(options.fail, options.put_drop, options.fail_seed)
    remotes = parse_remotes(options.remote)
    setting = options.setting
    nodes: list[Any] = []
    skill_config: Any = None
    if options.backend == "fetch":
        backend = fetch_backend(options, setting, **node_kwargs)
        defaults = SensorConfig()
        # The skills move the arm no faster per control step than the robot's joint speed limit lets it follow.
        arm_speed = min(defaults.arm_speed, backend.robot.config.safety.max_joint_speed * defaults.control_period)
        backend_name, skill_config = "fetch", replace(defaults, views=FETCH_SKILL_VIEWS, arm_speed=arm_speed)
    else:
        backend_name = resolve_backend_name(options.backend)
        backend = create_backend(backend_name)
    perception = perception_of(setting, options.perception or None)
    # The planner's text observation and the skills each get their own detector (the learned one keeps tracks).
    # With the fetch backend the observation's masks are already the robot's detector's: they are read as given.
    text_detector = None if perception == "segmentation" or options.backend == "fetch" else create_detector(perception)
    skill_perception = "segmentation" if options.backend == "fetch" else perception
    failure_model = FailureModel(failures) if failures.enabled else None
    run_start = failure_model.start_run if failure_model is not None else None
    bridge = BridgeNode(backend=backend, detector=text_detector, on_run_start=run_start, parameter_overrides=[
        Parameter("backend", value=backend_name), Parameter("scene_path", value=scene_path),
        Parameter("seed", value=-1 if scene_path else options.seed),
        Parameter("rate_hz", value=float(options.rate_hz)),
        Parameter("camera_rate_hz", value=float(options.camera_rate_hz))], **node_kwargs)
    nodes.append(bridge)
    lock = bridge.exclusive()
    if setting == "background":
        skills: Any = PrivilegedSkills(bridge.backend, failure_model=failure_model, lock=lock)
        m3: Any = skills
    else:
        skills = SensorSkills(SensorOnlyRobot(bridge.backend), skill_config, create_detector(skill_perception),
                              failure_model=failure_model, lock=lock)
        m3 = RefusingPolicy(M3_REFUSAL)
    claim = RobotClaim(bridge.paused)
    for server in SERVERS:
        policy: Any = m3 if server == "m3" else skills
        if server in remotes:
            client = PolicyClient(ClientConfig(remotes[server], float(options.remote_timeout)))
            policy = RemotePolicy(bridge.backend, client, MODEL_OF_SERVER[server], lock=lock)
        nodes.append(SkillServerNode(server, policy, claim, **node_kwargs))
    bridge.get_logger().info(f"{describe(setting, perception=perception)}; skill servers: {', '.join(SERVERS)}"
                             f"{' (m3 refuses every goal)' if setting == 'no_background' else ''}; failure model "
                             f"{dict(failures.probabilities) if failures.enabled else 'off'}; remote "
                             f"{remotes or 'none'}")
    return nodes


def fetch_backend(options: StackOptions, setting: str, **node_kwargs: Any) -> Any:
    """The FetchBackend of a fetch_robot node spinning on its own thread (a real Fetch, or the fake one, through its
    ROS interfaces); closing the backend closes the node.

    Raises:
        ValueError: the background setting (a robot has no privileged scene for M3) or a bad option.
    """
    from habitat_bridge.fetch.backend import FetchBackendConfig
    from habitat_bridge.fetch.robot_node import FetchRobotNode
    from habitat_bridge.fetch.config import FetchConfig
    from habitat_bridge.fetch.safety import SafetyConfig

    if setting != "no_background":
        raise ValueError("--backend fetch runs the sensor-only skills: give --setting no_background (a robot has no "
                         "privileged scene for the M3 skills)")
    config = FetchConfig(safety=SafetyConfig(max_joint_speed=float(options.fetch_joint_speed),
                                             dry_run=options.fetch_dry_run))
    return FetchRobotNode(config, FetchBackendConfig(views_by=options.fetch_views_by), **node_kwargs).backend


def main(argv: list[str] | None = None) -> int:
    """Run the stack until interrupted (ROS arguments such as --ros-args --params-file are honoured)."""
    from emmoe_core.ros_helpers import declare_config, spin_node
    from rclpy.node import Node
    from rclpy.utilities import remove_ros_args

    arguments = ["sim_stack", *(sys.argv[1:] if argv is None else argv)]
    cli = build_parser().parse_args(remove_ros_args(arguments)[1:])
    temporary: list[tempfile.TemporaryDirectory[str]] = []

    def nodes() -> list[Any]:
        settings = Node("sim_stack")
        options = resolve_options(cli, declare_config(settings, StackOptions))
        scene_path = options.scene
        if options.compact and not scene_path:
            from habitat_bridge.apartment import compact_room
            from habitat_bridge.scene_spec import save_scene_spec

            temporary.append(tempfile.TemporaryDirectory(prefix="homiebot_scene_"))
            scene_path = str(save_scene_spec(compact_room(options.seed), Path(temporary[0].name) / "compact.json"))
        return [settings, *build_nodes(options, scene_path)]

    def cleanup() -> None:
        for folder in temporary:
            folder.cleanup()

    return spin_node(nodes, arguments, num_threads=6, name="sim_stack", ready_line=READY_LINE, on_shutdown=cleanup)


if __name__ == "__main__":
    sys.exit(main())
