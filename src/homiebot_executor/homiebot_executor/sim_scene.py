"""A SceneSnapshot straight from a simulator backend (in-process: tests, benchmarks, the direct executor).

The same information /sim/query_scene carries (homiebot_executor.messages.snapshot_from_query), read from the
backend's privileged queries without ROS: instances (parts excluded from the objects, as there), doors and drawers
with their furniture, the hand and the contact force.
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from homiebot_executor.scene import OBJECT_KINDS, ContainerInfo, ObjectInfo, SceneSnapshot


def snapshot_from_backend(backend: Any, lock: AbstractContextManager | None = None) -> SceneSnapshot:
    """The backend's current scene (`backend` implements habitat_bridge.backends.base.SimBackend)."""
    with lock if lock is not None else nullcontext():
        robot = backend.robot_state()
        instances = backend.object_states()
        parts = backend.container_states()
        force = float(backend.contact_force())
    part_names = {part.name for part in parts}
    listed = {state.name: state for state in instances}
    objects = tuple(ObjectInfo(state.name, state.canonical,
                               state.kind if state.kind in OBJECT_KINDS else "furniture",
                               tuple(state.pose.position), tuple(state.size), state.receptacle, state.inside,
                               float(state.distance))
                    for state in instances if state.name not in part_names)
    containers = tuple(ContainerInfo(part.name, part.canonical, part.joint_type, part.position, part.lower, part.upper,
                                     part.open_threshold, part.is_open, part.furniture,
                                     float(listed[part.name].distance) if part.name in listed else math.inf)
                       for part in parts)
    base = robot.base
    return SceneSnapshot((base.position[0], base.position[1]), base.yaw, robot.held_object or "", force, objects,
                         containers)
