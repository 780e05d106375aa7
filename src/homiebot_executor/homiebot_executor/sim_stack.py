"""The simulation stack in one process: the MuJoCo backend, the habitat_bridge node and the five skill servers.

Standard ROS 2 composition: several nodes, one MultiThreadedExecutor, one process, so the privileged (M3) skills
call the backend object directly while every interface stays a real ROS one (/sim/* services from the bridge,
/skills/<server>/navigate|manipulate actions). The bridge's free-running simulation pauses while a skill steps the
simulator itself (skills run in simulated time); both share the bridge's backend lock.

Each server runs the privileged policy (the benchmark's background-information setting) unless `--remote
SERVER=URL` points it at a policy server speaking homiebot-policy/1. An optional seeded failure model makes attempts
fail with given probabilities (`--fail navigate=0.3,pick=0.5`, or `--fail table4` for the paper's Table 4 rates).

    python -m homiebot_executor.sim_stack --seed 3            # generated apartment, seed 3
    python -m homiebot_executor.sim_stack --scene my_scene.json --fail table4 --fail-seed 7
Prints "homiebot sim stack ready" once everything serves.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.parameter import Parameter

from homiebot_executor.failure_model import (
    TABLE4_SUCCESS_RATES,
    FailureConfig,
    FailureModel,
    from_subtask_success_rates,
)
from homiebot_executor.remote.client import ClientConfig, PolicyClient
from homiebot_executor.routing import SERVER_OF_MODEL, SERVERS
from homiebot_executor.skill_servers import RobotClaim, SkillServerNode

READY_LINE = "homiebot sim stack ready"
MODEL_OF_SERVER = {server: model for model, server in SERVER_OF_MODEL.items()}


def skill_aware_bridge_class() -> type:
    """habitat_bridge's BridgeNode, with its simulation tick paused while an in-process skill runs.

    BridgeNode steps the simulator from a wall-clock timer and stops the base when /cmd_vel goes quiet; a skill that
    steps the simulator itself must not be interleaved with that. This thin subclass skips the tick while
    `skill_running` is set and exposes the backend lock the bridge uses.
    """
    from habitat_bridge.bridge_node import BridgeNode

    class SkillAwareBridge(BridgeNode):  # type: ignore[misc, valid-type]
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.skill_running = threading.Event()

        @property
        def backend_lock(self) -> Any:
            """The lock every backend call of the bridge holds."""
            return self._lock

        @contextmanager
        def skill_control(self) -> Iterator[None]:
            """Pause the free-running simulation while the body of the with-statement runs a skill."""
            self.skill_running.set()
            try:
                yield
            finally:
                self.skill_running.clear()

        def _on_tick(self) -> None:
            if self.skill_running.is_set():
                return
            super()._on_tick()

    return SkillAwareBridge


def parse_failures(text: str, attempts: int = 3) -> dict[str, float]:
    """"navigate=0.3,pick=0.5" or "table4" -> per-attempt failure probabilities.

    Raises:
        ValueError: a malformed entry.
    """
    if not text:
        return {}
    if text.strip() == "table4":
        return from_subtask_success_rates(TABLE4_SUCCESS_RATES, attempts)
    probabilities = {}
    for entry in text.split(","):
        skill, _, value = entry.partition("=")
        try:
            probabilities[skill.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--fail: expected skill=probability, got {entry!r}") from None
    return probabilities


def parse_remotes(entries: list[str]) -> dict[str, str]:
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


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the stack."""
    parser = argparse.ArgumentParser(prog="sim_stack", description=__doc__.split("\n")[0])
    parser.add_argument("--scene", default="", help="scene spec file (JSON/YAML) or official scene.json")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated apartment (when no --scene)")
    parser.add_argument("--compact", action="store_true", help="the small test kitchen instead of the apartment")
    parser.add_argument("--fail", default="", help="failure model: skill=p,... or table4")
    parser.add_argument("--fail-seed", type=int, default=0, help="seed of the failure model")
    parser.add_argument("--put-drop", type=float, default=0.0, help="probability that a failing Put drops the object")
    parser.add_argument("--remote", action="append", default=[], metavar="SERVER=URL",
                        help="run SERVER (nomad, pixnav, rt1x, octo) on a homiebot-policy/1 server")
    parser.add_argument("--remote-timeout", type=float, default=5.0, help="seconds per policy request")
    parser.add_argument("--rate-hz", type=float, default=50.0, help="bridge control rate")
    parser.add_argument("--camera-rate-hz", type=float, default=2.0, help="bridge camera publishing rate")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the stack until interrupted."""
    args = build_parser().parse_args(argv)
    try:
        failures = FailureConfig(parse_failures(args.fail), args.put_drop, args.fail_seed)
        remotes = parse_remotes(args.remote)
    except ValueError as error:
        print(f"sim_stack: error: {error}", file=sys.stderr)
        return 2
    scene_path = args.scene
    temporary = None
    if args.compact and not scene_path:
        from habitat_bridge.apartment import compact_room
        from habitat_bridge.scene_spec import save_scene_spec

        temporary = tempfile.TemporaryDirectory(prefix="homiebot_scene_")
        scene_path = str(save_scene_spec(compact_room(args.seed), Path(temporary.name) / "compact.json"))
    rclpy.init()
    nodes: list[Any] = []
    try:
        from habitat_bridge.backends.mujoco_backend import MujocoBackend

        from homiebot_executor.policies.privileged import PrivilegedSkills
        from homiebot_executor.policies.remote import RemotePolicy

        bridge = skill_aware_bridge_class()(backend=MujocoBackend(), parameter_overrides=[
            Parameter("backend", value="mujoco"), Parameter("scene_path", value=scene_path),
            Parameter("seed", value=-1 if scene_path else args.seed), Parameter("rate_hz", value=args.rate_hz),
            Parameter("camera_rate_hz", value=args.camera_rate_hz)])
        nodes.append(bridge)
        lock = bridge.backend_lock
        failure_model = FailureModel(failures) if failures.enabled else None
        privileged = PrivilegedSkills(bridge.backend, failure_model=failure_model, lock=lock)
        claim = RobotClaim(bridge.skill_control)
        for server in SERVERS:
            policy: Any = privileged
            if server in remotes:
                client = PolicyClient(ClientConfig(remotes[server], args.remote_timeout))
                policy = RemotePolicy(bridge.backend, client, MODEL_OF_SERVER[server], lock=lock)
            nodes.append(SkillServerNode(server, policy, claim))
        executor = MultiThreadedExecutor(num_threads=6)
        for node in nodes:
            executor.add_node(node)
        bridge.get_logger().info(f"skill servers: {', '.join(SERVERS)}; failure model "
                                 f"{dict(failures.probabilities) if failures.enabled else 'off'}; remote "
                                 f"{remotes or 'none'}")
        print(READY_LINE, flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (ValueError, OSError) as error:
        print(f"sim_stack: error: {error}", file=sys.stderr)
        return 2
    finally:
        for node in reversed(nodes):
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
        if temporary is not None:
            temporary.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
