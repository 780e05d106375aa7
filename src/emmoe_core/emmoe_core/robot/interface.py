"""The two interfaces skills drive: `Robot` (what a real Fetch offers too) and `PrivilegedScene` (M3 only).

Both are structural (typing.Protocol): a backend implements them by having the methods, without inheriting from
anything here. `SimulatedRobot` is both at once, which is what the M3 skills and the remote-policy client need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import SceneLayout
from emmoe_core.robot.state import VIEWS, ContainerState, InstanceState, Observation, RobotState


class Robot(Protocol):
    """Base motion, arm and torso, gripper and sensors of one Fetch.

    Commands hold until changed; `step` lets them act for a while (a simulator advances simulated time, a real
    robot waits). Every method may raise BackendError when the robot or simulator fails.
    """

    def step(self, seconds: float) -> None:
        """Let the current commands act for `seconds`."""
        ...

    def robot_state(self) -> RobotState:
        """Base pose, joint states (emmoe_core.robot.fetch names), grasp-point pose, held object."""
        ...

    def robot_description(self) -> str:
        """MJCF of the robot's kinematic tree (joints and the grasp site named as in emmoe_core.robot.fetch)."""
        ...

    def set_base_velocity(self, forward: float, turn: float) -> None:
        """Command the base: forward speed (m/s) and turn rate (rad/s)."""
        ...

    def set_arm_targets(self, positions: Sequence[float]) -> None:
        """Joint-position targets of the seven arm joints (fetch.ARM_JOINTS order, radians, clipped to limits)."""
        ...

    def set_torso_target(self, height: float) -> None:
        """Torso lift target (metres, clipped)."""
        ...

    def open_gripper(self) -> str | None:
        """Open the fingers; returns the name of the object let go (None when the hand was empty)."""
        ...

    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        """Close the fingers on the object nearest the grasp point within `max_distance` metres (a simulator welds
        it), or else on the door or drawer handle there (the part then follows the hand; held_object() stays None);
        returns the object's or the part's name, or None when nothing was in reach."""
        ...

    def held_object(self) -> str | None:
        """Name of the object in the hand, or None."""
        ...

    def contact_force(self) -> float:
        """Largest contact force (N) on the robot body during the last step (the held object excluded)."""
        ...

    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        """Render or capture the head-camera views."""
        ...


class PrivilegedScene(Protocol):
    """Ground truth about the scene, used only in the M3 ("with background information") setting.

    Raises UnknownNameError for names that match nothing, BackendError when the backend cannot answer.
    """

    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        """Poses and relations of instances (instance, canonical or alias names; None: everything)."""
        ...

    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        """Doors and drawers matching the names (their own or their furniture's names; None: all)."""
        ...

    def set_container_target(self, name: str, position: float) -> None:
        """Drive a door or drawer towards a joint value (it moves while the robot steps)."""
        ...

    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        """Top-down occupancy of walls and furniture at the current door positions (objects excluded)."""
        ...

    def scene_layout(self) -> SceneLayout:
        """Furniture, doors and drawers, and support regions of the loaded episode."""
        ...

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether the arm at these joints (and torso) would penetrate furniture or walls now (False when the
        backend cannot check)."""
        ...

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """Whether the straight joint-space move from start to end stays clear of furniture and walls (True when
        the backend cannot check)."""
        ...


class SimulatedRobot(Robot, PrivilegedScene, Protocol):
    """A robot whose backend also answers privileged queries (every simulator backend)."""
