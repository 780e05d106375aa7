"""A stand-in simulator for tests and benchmarks: /sim/query_scene answered from a fixed SceneSnapshot.

`StaticSceneServer` serves a snapshot (a small kitchen by default) so the executor node can be exercised without
MuJoCo; `snapshot_to_query` is the inverse of homiebot_executor.messages.snapshot_from_query. Run it as a process
with `python -m homiebot_executor.static_scene [--held apple_0]`; it prints "static scene ready".
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from typing import Any

import rclpy
from emmoe_interfaces.msg import ContainerState, ObjectState
from emmoe_interfaces.srv import QueryScene
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from homiebot_executor.scene import ContainerInfo, ObjectInfo, SceneSnapshot

READY_LINE = "static scene ready"


def demo_kitchen(held: str = "") -> SceneSnapshot:
    """A small kitchen around the robot at the origin: an apple within reach, a far sofa, a closed fridge."""

    def item(name: str, canonical: str, kind: str, x: float, y: float, z: float) -> ObjectInfo:
        return ObjectInfo(name, canonical, kind, (x, y, z), (0.1, 0.1, 0.1), distance=math.hypot(x, y))

    objects = (item("apple_0", "013_apple", "object", 0.8, 0.0, 0.8),
               item("brown_table_0", "frl_apartment_table_01", "furniture", 1.1, 0.0, 0.4),
               item("fridge_0", "fridge", "container", 0.0, 1.5, 0.9),
               item("sofa_0", "frl_apartment_sofa", "furniture", 6.0, 0.0, 0.4))
    door = ContainerInfo("fridge_0_door", "fridge", "hinge", 0.0, 0.0, 2.0, 0.8, False, "fridge_0", 1.45)
    return SceneSnapshot((0.0, 0.0), 0.0, held, 0.0, objects, (door,))


def snapshot_to_query(snapshot: SceneSnapshot, response: QueryScene.Response) -> QueryScene.Response:
    """Fill a QueryScene response from a snapshot (parts are listed as objects too, as the bridge does)."""
    response.robot_pose.position.x, response.robot_pose.position.y = snapshot.robot_position
    response.robot_pose.orientation.w = math.cos(snapshot.robot_yaw / 2)
    response.robot_pose.orientation.z = math.sin(snapshot.robot_yaw / 2)
    response.held_object = snapshot.held_object
    response.contact_force = snapshot.contact_force
    listed = list(snapshot.objects)
    for part in snapshot.containers:
        owner = snapshot.object(part.owner)
        if owner is not None:
            listed.append(replace(owner, name=part.name, kind="container", distance=part.distance))
    for info in listed:
        state = ObjectState(name=info.name, canonical=info.canonical, kind=info.kind, on=info.on,
                            inside=info.inside, distance=info.distance)
        state.pose.position.x, state.pose.position.y, state.pose.position.z = info.position
        state.pose.orientation.w = 1.0
        state.size.x, state.size.y, state.size.z = info.size
        response.objects.append(state)
    for part in snapshot.containers:
        response.containers.append(ContainerState(
            name=part.name, canonical=part.canonical, furniture=part.owner, joint_type=part.joint_type,
            position=part.position, lower_limit=part.lower_limit, upper_limit=part.upper_limit,
            open_threshold=part.open_threshold, is_open=part.is_open))
    response.success, response.error_code = True, QueryScene.Response.NONE
    return response


class StaticSceneServer(Node):
    """Serves /sim/query_scene from a snapshot that tests may replace (`scene`)."""

    def __init__(self, scene: SceneSnapshot | None = None, **node_kwargs: Any) -> None:
        """Serve `scene` (the demo kitchen by default)."""
        super().__init__("static_scene", **node_kwargs)
        self.scene = scene or demo_kitchen()
        self.queries = 0
        self.create_service(QueryScene, "/sim/query_scene", self._on_query)

    def _on_query(self, request: QueryScene.Request, response: QueryScene.Response) -> QueryScene.Response:
        self.queries += 1
        return snapshot_to_query(self.scene, response)


def main(argv: list[str] | None = None) -> int:
    """Serve the demo kitchen until interrupted."""
    parser = argparse.ArgumentParser(description="Serve /sim/query_scene from a fixed demo kitchen.")
    parser.add_argument("--held", default="", help="instance name in the gripper (default: empty hand)")
    args = parser.parse_args(argv)
    rclpy.init()
    node = StaticSceneServer(demo_kitchen(args.held))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print(READY_LINE, flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
