"""The fetch backend's memory of the room: the operator's map matches where the simulator puts things, and the
executed subtasks move objects and doors in it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from emmoe_core.robot.state import UnknownNameError

from habitat_bridge.fetch.scene_memory import SceneMemory
from habitat_bridge.scene_spec import SceneSpec

SCENE = Path(__file__).resolve().parents[3] / "data" / "test" / "100" / "scene.json"


@pytest.fixture
def memory() -> SceneMemory:
    return SceneMemory(SceneSpec.from_dict(json.loads(SCENE.read_text())))


def test_the_map_places_objects_where_the_simulator_does(memory):
    mujoco_backend = pytest.importorskip("habitat_bridge.backends.mujoco_backend")
    sim = mujoco_backend.MujocoBackend()
    try:
        sim.reset(SceneSpec.from_dict(json.loads(SCENE.read_text())))
        truth = {state.name: state for state in sim.object_states() if state.kind == "object"}
    finally:
        sim.close()
    remembered = {state.name: state for state in memory.object_states(None, (0.0, 0.0)) if state.kind == "object"}
    assert set(remembered) == set(truth)
    for name, state in truth.items():
        assert math.dist(state.pose.position, remembered[name].pose.position) < 0.05, name


def test_names_resolve_like_the_simulator_and_unknown_ones_raise(memory):
    assert memory.resolve("green_can", (0.0, 0.0))
    assert all(part.furniture.startswith("fridge") for part in memory.container_states(["fridge"], (0.0, 0.0)))
    with pytest.raises(UnknownNameError):
        memory.object_states(["unicorn"], (0.0, 0.0))


def test_executed_subtasks_move_objects_and_doors(memory):
    can = memory.resolve("green_can", (0.0, 0.0))[0]
    fridge = memory.resolve("fridge", (0.0, 0.0))[0]
    memory.apply("Pick", can, "", success=False)
    assert memory.held is None
    memory.apply("Pick", can, "", success=True)
    assert memory.held == can
    memory.follow_hand((1.0, 2.0, 0.9))
    assert memory.object_states([can], (1.0, 2.0))[0].distance == pytest.approx(0.0)
    memory.apply("Open", fridge, "", success=True)
    assert all(part.is_open for part in memory.container_states([fridge], (0.0, 0.0)))
    memory.apply("Put", can, fridge, success=True)
    state = memory.object_states([can], (0.0, 0.0))[0]
    assert memory.held is None and state.receptacle == fridge and state.inside
    memory.apply("Close", fridge, "", success=True)
    assert not any(part.is_open for part in memory.container_states([fridge], (0.0, 0.0)))
    assert memory.nearest_object(state.pose.position, 0.05) == can
