"""Name resolution details (emmoe_core.robot.naming; here for the executor's kitchen fixture)."""

from __future__ import annotations

from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.robot.state import InstanceState, Pose

from emmoe_core.robot.naming import NameResolver


def test_rooms_come_after_furniture_with_the_same_name():
    snapshot = SceneSnapshot((0.0, 0.0), objects=(
        InstanceState("kitchen_0", "kitchen_counter", "room", Pose((0.1, 0.0, 0.0)), (0.0, 0.0, 0.0), distance=0.1),
        InstanceState("kitchen_counter_0", "kitchen_counter", "container", Pose((3.0, 0.0, 0.4)), (0.0, 0.0, 0.0),
                      distance=3.0)))
    assert NameResolver().resolve("kitchen", snapshot, "go to").instance.name == "kitchen_counter_0"


def test_go_to_and_open_a_drawer_prefer_the_drawer_holding_something(make_kitchen):
    """Two closed drawers, kitchen_drawer_0 nearer; a bowl lies inside kitchen_drawer_1: that one is meant."""
    from dataclasses import replace

    scene = make_kitchen(robot=(-1.5, -1.0))
    bowl_inside = [replace(item, receptacle="kitchen_drawer_1", inside=True) if item.name == "bowl_0" else item
                   for item in scene.objects]
    with_bowl = replace(scene, objects=tuple(bowl_inside))
    resolver = NameResolver()
    assert resolver.resolve("drawer", scene, "open").name == "kitchen_drawer_0"
    for verb in ("go to", "open"):
        assert resolver.resolve("drawer", with_bowl, verb).name == "kitchen_drawer_1"
    assert resolver.resolve("drawer", with_bowl, "close").name == "kitchen_drawer_0"
