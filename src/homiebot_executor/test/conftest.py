"""Fixtures of the homiebot_executor tests: hand-made scene snapshots and the stand-in scene server."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.robot.state import ContainerState, InstanceState, Pose


def kitchen(robot: tuple[float, float] = (0.0, 0.0), held: str = "", fridge_open: bool = False,
            drawer_positions: tuple[float, float] = (0.0, 0.0)) -> SceneSnapshot:
    """A kitchen: two apples (near and far), a bowl, a brown table, the fridge with its door, a counter with two
    drawers, a sofa far away. Distances are planar from `robot`."""

    def obj(name: str, canonical: str, kind: str, x: float, y: float, z: float = 0.8) -> InstanceState:
        return InstanceState(name, canonical, kind, Pose((x, y, z)), (0.1, 0.1, 0.1), distance=math.dist(robot, (x, y)))

    objects = (
        obj("apple_0", "013_apple", "object", 1.0, 0.0),
        obj("apple_1", "013_apple", "object", 3.5, 0.0),
        obj("bowl_0", "024_bowl", "object", 0.05, 0.05),
        obj("brown_table_0", "frl_apartment_table_01", "furniture", 1.2, 0.0, 0.4),
        obj("fridge_0", "fridge", "container", 0.0, 1.5, 0.9),
        obj("kitchen_counter_0", "kitchen_counter", "container", -1.5, 0.0, 0.45),
        obj("sofa_0", "frl_apartment_sofa", "furniture", 6.0, 0.0, 0.4),
    )
    door_position = 1.2 if fridge_open else 0.0
    containers = (
        ContainerState("fridge_0_door", "fridge", "door", "fridge_0", "hinge", door_position, 0.0, 2.0, 0.8,
                       distance=math.dist(robot, (0.0, 1.5))),
        *(ContainerState(f"kitchen_drawer_{index}", "kitchen_counter", "drawer", "kitchen_counter_0", "slide",
                         position, 0.0, 0.45, 0.25, distance=math.dist(robot, (-1.5, -0.5 + index)))
          for index, position in enumerate(drawer_positions)),
    )
    return SceneSnapshot(robot, 0.0, held, 0.0, objects, containers)


@pytest.fixture
def make_kitchen() -> Callable[..., SceneSnapshot]:
    """The `kitchen(...)` snapshot builder."""
    return kitchen


@pytest.fixture(scope="session")
def static_scene() -> ModuleType:
    """test/static_scene.py (StaticSceneServer, demo_kitchen, snapshot_to_query; run it by its `__file__`)."""
    path = Path(__file__).with_name("static_scene.py")
    spec = importlib.util.spec_from_file_location("homiebot_executor_test_static_scene", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
