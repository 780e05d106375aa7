"""The privileged scene at one instant (`SceneSnapshot`), as the bridge serves it and the executor reasons about it.

One family of scene types for the whole stack: the snapshot holds the same `InstanceState` and `ContainerState`
values the backends return (emmoe_core.robot.state). `snapshot_of` reads one from a backend in-process;
emmoe_core.robot.messages turns it into a QueryScene response and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from emmoe_core.robot.interface import SimulatedRobot
from emmoe_core.robot.state import ContainerState, InstanceState, UnknownNameError


@dataclass(frozen=True)
class SceneSnapshot:
    """The privileged state at one instant.

    Attributes:
        robot_position: base position (x, y), metres.
        robot_yaw: base heading, radians.
        held_object: instance name of the object in the gripper, "" when the hand is empty.
        contact_force: largest contact force on the robot during the last control step, newtons.
        objects: objects, furniture (and rooms when the simulator reports them); doors and drawers excluded.
        containers: articulated parts (doors, drawers).
        parts: the articulated parts as instances (pose, size, distance), in the order the simulator listed them.
    """

    robot_position: tuple[float, float]
    robot_yaw: float = 0.0
    held_object: str = ""
    contact_force: float = 0.0
    objects: tuple[InstanceState, ...] = ()
    containers: tuple[ContainerState, ...] = ()
    parts: tuple[InstanceState, ...] = ()
    _objects_by_name: dict[str, InstanceState] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_objects_by_name", {item.name: item for item in self.objects})

    def object(self, name: str) -> InstanceState | None:
        """The object, furniture or room called `name`."""
        return self._objects_by_name.get(name)

    def container(self, name: str) -> ContainerState | None:
        """The articulated part called `name`."""
        return next((item for item in self.containers if item.name == name), None)

    def containers_of(self, owner: str) -> tuple[ContainerState, ...]:
        """The articulated parts of one piece of furniture."""
        return tuple(item for item in self.containers if item.furniture == owner)

    @property
    def hand_empty(self) -> bool:
        """Whether nothing is in the gripper."""
        return not self.held_object

    def held_canonical(self) -> str:
        """Canonical name of the held object ("" when the hand is empty or the object is unknown)."""
        held = self.object(self.held_object) if self.held_object else None
        return held.canonical if held is not None else ""


def assemble(robot_position: tuple[float, float], robot_yaw: float, held_object: str, contact_force: float,
             instances: Sequence[InstanceState], containers: Sequence[ContainerState]) -> SceneSnapshot:
    """A snapshot from what a simulator lists: parts among the instances are split off, and every part gets the
    distance of its instance."""
    part_names = {part.name for part in containers}
    listed = {state.name: state for state in instances}
    with_distance = tuple(replace(part, distance=float(listed[part.name].distance)) if part.name in listed else part
                          for part in containers)
    return SceneSnapshot(robot_position, robot_yaw, held_object, contact_force,
                         tuple(state for state in listed.values() if state.name not in part_names), with_distance,
                         tuple(state for state in listed.values() if state.name in part_names))


def snapshot_of(robot: SimulatedRobot, names: Sequence[str] = (), lock: AbstractContextManager[Any] | None = None
                ) -> SceneSnapshot:
    """The backend's current scene: everything, or the instances matching `names` and their doors and drawers.

    Raises:
        UnknownNameError: a name matches no instance.
    """
    with lock if lock is not None else nullcontext():
        state = robot.robot_state()
        instances = robot.object_states(list(names))
        if names:
            found: dict[str, ContainerState] = {}
            for name in names:
                try:
                    found.update({part.name: part for part in robot.container_states([name])})
                except UnknownNameError:
                    continue
            containers = list(found.values())
        else:
            containers = robot.container_states()
        force = float(robot.contact_force())
    base = state.base
    return assemble((base.position[0], base.position[1]), base.yaw, state.held_object or "", force, instances,
                    containers)
