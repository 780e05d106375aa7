"""A stand-in simulator for tests and benchmarks: /sim/query_scene answered from a fixed SceneSnapshot.

`StaticSceneServer` serves a snapshot (a small kitchen by default) through emmoe_core.robot.messages, the bridge's
own conversion, so the executor node can be exercised without MuJoCo. A test helper, not installed: tests get the
module from the `static_scene` fixture (conftest.py) and run it as a process with
`python src/homiebot_executor/test/static_scene.py [--held apple_0]`; it prints "static scene ready".
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from emmoe_core.robot.messages import snapshot_to_query
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.robot.state import ContainerState, InstanceState, Pose
from emmoe_core.ros_helpers import spin_node
from emmoe_core.topics import QUERY_SCENE_SERVICE
from emmoe_interfaces.srv import QueryScene
from rclpy.node import Node

READY_LINE = "static scene ready"


def demo_kitchen(held: str = "") -> SceneSnapshot:
    """A small kitchen around the robot at the origin: an apple within reach, a far sofa, a closed fridge."""

    def item(name: str, canonical: str, kind: str, x: float, y: float, z: float) -> InstanceState:
        return InstanceState(name, canonical, kind, Pose((x, y, z)), (0.1, 0.1, 0.1), distance=math.hypot(x, y))

    objects = (item("apple_0", "013_apple", "object", 0.8, 0.0, 0.8),
               item("brown_table_0", "frl_apartment_table_01", "furniture", 1.1, 0.0, 0.4),
               item("fridge_0", "fridge", "container", 0.0, 1.5, 0.9),
               item("sofa_0", "frl_apartment_sofa", "furniture", 6.0, 0.0, 0.4))
    door = ContainerState("fridge_0_door", "fridge", "door", "fridge_0", "hinge", 0.0, 0.0, 2.0, 0.8, distance=1.45)
    door_instance = InstanceState("fridge_0_door", "fridge", "container", Pose((0.0, 1.5, 0.9)), (0.1, 0.1, 0.1),
                                  distance=1.45)
    return SceneSnapshot((0.0, 0.0), 0.0, held, 0.0, objects, (door,), (door_instance,))


class StaticSceneServer(Node):
    """Serves /sim/query_scene from a snapshot that tests may replace (`scene`)."""

    def __init__(self, scene: SceneSnapshot | None = None, **node_kwargs: Any) -> None:
        """Serve `scene` (the demo kitchen by default)."""
        super().__init__("static_scene", **node_kwargs)
        self.scene = scene or demo_kitchen()
        self.queries = 0
        self.create_service(QueryScene, QUERY_SCENE_SERVICE, self._on_query)

    def _on_query(self, request: QueryScene.Request, response: QueryScene.Response) -> QueryScene.Response:
        self.queries += 1
        return snapshot_to_query(self.scene, response)


def main(argv: list[str] | None = None) -> int:
    """Serve the demo kitchen until interrupted."""
    parser = argparse.ArgumentParser(description="Serve /sim/query_scene from a fixed demo kitchen.")
    parser.add_argument("--held", default="", help="instance name in the gripper (default: empty hand)")
    args = parser.parse_args(argv)
    return spin_node(lambda: StaticSceneServer(demo_kitchen(args.held)), num_threads=1, name="static_scene",
                     ready_line=READY_LINE)


if __name__ == "__main__":
    sys.exit(main())
