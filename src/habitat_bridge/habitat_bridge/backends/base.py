"""The simulator-backend interface every backend implements (MuJoCo, Habitat, ...).

A SimBackend is an emmoe_core.robot.interface.SimulatedRobot (the robot/skill interface, whose value types live in
emmoe_core.robot.state) plus what the bridge needs around it: reset, episode id, name resolution, teleporting.

A backend holds one episode at a time. Typical use by a skill executor::

    backend.reset(spec)                      # or reset(None, seed=3) for a generated apartment
    obs = backend.observe(depth=True, segmentation=True)
    backend.set_base_velocity(0.3, 0.0)      # m/s forward, rad/s turn
    backend.step(0.5)                        # advance simulated time
    [apple] = backend.resolve("apple")[:1]   # instance names matching a planner's name, nearest first
    state = backend.object_states([apple])[0]
    backend.set_arm_targets(joint_positions) # 7 values, order backend.arm_joint_names (IK is the caller's)
    backend.step(1.0); backend.close_gripper()   # weld-grasps the object nearest the gripper
    backend.held_object()                    # -> "apple_0"

Privileged queries (poses, container joints, on/in relations, contact force, occupancy grid) exist for the M3
"with background information" skills and for the error-detection monitor; sensor-only skills use `observe`.
Backends are not thread-safe: callers serialise access (the bridge node holds a lock).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

from emmoe_core.names import AliasTable, default_alias_table, normalize
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.robot.layout import SceneLayout
from emmoe_core.robot.state import VIEWS, ContainerState, InstanceState, Observation, RobotState

from habitat_bridge.official import OfficialEpisode
from habitat_bridge.scene_spec import SceneSpec

Scene = SceneSpec | OfficialEpisode


class SimBackend(ABC):
    """One simulator holding one episode. Every method except reset raises BackendError before the first reset."""

    #: Backend name used in configuration ("mujoco", "habitat", "fetch").
    name: str = ""
    #: Whether the backend runs on its own clock (a real robot): the bridge node then neither steps it nor publishes
    #: its /odom, /joint_states and /clock, and it starts no episode before the first reset request.
    runs_itself: bool = False

    @property
    @abstractmethod
    def episode_id(self) -> str:
        """Identifier of the loaded episode."""

    @property
    @abstractmethod
    def time(self) -> float:
        """Simulated seconds since the last reset."""

    @property
    @abstractmethod
    def views(self) -> tuple[str, ...]:
        """Camera views `observe` accepts (at least VIEWS)."""

    @property
    @abstractmethod
    def arm_joint_names(self) -> tuple[str, ...]:
        """The seven arm joints, in the order set_arm_targets expects."""

    @abstractmethod
    def reset(self, scene: Scene | None = None, seed: int | None = None) -> str:
        """Load a scene and return the episode id.

        Args:
            scene: a scene spec, an official episode, or None for the backend's default scene.
            seed: overrides the scene's seed (objects without fixed placements land elsewhere); None keeps it.

        Raises:
            SceneSpecError: the scene is invalid for this backend.
            BackendError: the simulator failed to build it.
        """

    @abstractmethod
    def observe(self, views: Sequence[str] = VIEWS, *, depth: bool = False,
                segmentation: bool = False) -> Observation:
        """Render camera views (RGB, optionally depth and instance segmentation with visible names).

        Raises:
            ValueError: an unknown view name.
        """

    @abstractmethod
    def step(self, seconds: float) -> None:
        """Advance the simulation by `seconds` under the current commands.

        Raises:
            ValueError: seconds is negative or not finite.
        """

    @abstractmethod
    def set_base_velocity(self, forward: float, turn: float) -> None:
        """Command the base: forward speed (m/s) and turn rate (rad/s), held until changed."""

    @abstractmethod
    def set_arm_targets(self, positions: Sequence[float]) -> None:
        """Joint-position targets for the seven arm joints (radians), clipped to the joint limits.

        Raises:
            ValueError: not seven finite numbers.
        """

    @abstractmethod
    def set_torso_target(self, height: float) -> None:
        """Torso lift target (metres, clipped to the joint range)."""

    @abstractmethod
    def set_head_target(self, pan: float, tilt: float) -> None:
        """Head pan and tilt targets (radians, clipped)."""

    @abstractmethod
    def close_gripper(self, max_distance: float = 0.12) -> str | None:
        """Close the fingers and weld-grasp the object nearest the grasp point, if within `max_distance` metres;
        with no object there, hold the door or drawer handle within that distance (the part follows the hand until
        open_gripper; held_object() stays None).

        Returns:
            The grasped object's or the held part's instance name, or None when nothing was in reach.
        """

    @abstractmethod
    def open_gripper(self) -> str | None:
        """Open the fingers and release the held object; returns its name (None when the hand was empty)."""

    @abstractmethod
    def held_object(self) -> str | None:
        """Instance name of the grasped object, or None."""

    @abstractmethod
    def robot_state(self) -> RobotState:
        """Base pose, joint states, gripper pose, held object."""

    @abstractmethod
    def object_states(self, names: Iterable[str] | None = None) -> list[InstanceState]:
        """Privileged state of instances.

        Args:
            names: instance, canonical or alias names; each may match several instances. None or empty: everything.

        Raises:
            UnknownNameError: a name matches nothing.
        """

    @abstractmethod
    def container_states(self, names: Iterable[str] | None = None) -> list[ContainerState]:
        """Doors and drawers matching the names (articulation names, their furniture's names, or labels such as
        "drawer"); None or empty: all.

        Raises:
            UnknownNameError: a name matches no door or drawer.
        """

    @abstractmethod
    def set_container_target(self, name: str, position: float) -> None:
        """Drive a door or drawer towards a joint value (it moves while the simulation steps).

        Raises:
            UnknownNameError: no such articulation.
        """

    @abstractmethod
    def set_container_position(self, name: str, position: float) -> None:
        """Put a door or drawer at a joint value at once (a drawer carries the objects in it).

        Raises:
            UnknownNameError: no such articulation.
        """

    @abstractmethod
    def contact_force(self) -> float:
        """Largest contact force (N) on the robot body during the last step call (the held object excluded)."""

    @abstractmethod
    def occupancy_grid(self, resolution: float = 0.05) -> OccupancyGrid:
        """2-D occupancy of walls and furniture at the current door positions (objects excluded)."""

    @abstractmethod
    def teleport_base(self, x: float, y: float, yaw: float) -> None:
        """Put the base at a pose at once (a held object comes along); velocities are zeroed.

        The pose should be free (see occupancy_grid): a base placed inside furniture is pushed out violently.
        """

    @abstractmethod
    def resolve(self, name: str) -> list[str]:
        """Instance names `name` may refer to (instance name, canonical or alias), nearest to the robot first."""

    @abstractmethod
    def robot_description(self) -> str:
        """MJCF of the robot's kinematic tree (emmoe_core.robot.interface.Robot)."""

    @abstractmethod
    def scene_layout(self) -> SceneLayout:
        """Furniture, doors and drawers, support regions of the loaded episode (PrivilegedScene)."""

    @abstractmethod
    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether an arm configuration would penetrate furniture or walls (False when the backend cannot check)."""

    @abstractmethod
    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """Whether a straight joint-space arm move stays clear (True when the backend cannot check)."""

    @abstractmethod
    def close(self) -> None:
        """Release the simulator (safe to call twice)."""


def resolve_name(name: str, instances: Sequence[tuple[str, str, tuple[str, ...]]],
                 table: AliasTable | None = None) -> list[str]:
    """Instance names matching `name`, in the order given.

    Args:
        name: an instance name ("apple_0"), a canonical name ("013_apple") or an alias ("red apple").
        instances: (instance name, canonical name, extra labels such as "drawer") per instance.
        table: alias table (the default one when None).

    An exact instance name matches only itself; otherwise every instance whose canonical entry the name may refer
    to, or whose extra label equals the name, matches.
    """
    table = table or default_alias_table()
    wanted = normalize(name)
    exact = [instance for instance, _, _ in instances if normalize(instance) == wanted]
    if exact:
        return exact
    canonicals = table.canonicals(name)
    return [instance for instance, canonical, labels in instances
            if canonical in canonicals or normalize(canonical) == wanted
            or any(normalize(label) == wanted for label in labels)]
