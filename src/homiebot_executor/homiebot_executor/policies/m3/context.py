"""What every M3 skill shares: the settings and the privileged scene on top of the stepped robot access of
homiebot_executor.policies.attempt.RobotContext.

`SkillContext` wraps one `SimulatedRobot` (emmoe_core.robot.interface). The skill modules (navigate, pick, place,
articulate, and the shared homiebot_executor.policies.arm_motion) are functions of a context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import numpy as np
from emmoe_core.robot import fetch
from emmoe_core.robot.interface import SimulatedRobot
from emmoe_core.robot.layout import FurnitureLayout, SceneLayout
from emmoe_core.robot.state import ContainerState, InstanceState
from emmoe_core.validation import require_positive_fields

from homiebot_executor.policies.arm_ik import IkConfig
from homiebot_executor.policies.attempt import RobotContext
from homiebot_executor.policies.navigation import ControllerConfig

# A test on arrays of world x and y: which points lie in some area.
Area = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class PrivilegedConfig:
    """Settings of the M3 skills.

    Attributes:
        control_period: simulated seconds per control step (the unit of the step budgets).
        robot_radius: radius of the base footprint (metres).
        clearance: extra margin kept from obstacles when planning (metres).
        grid_resolution: occupancy-grid cell size (metres).
        nav_success_distance: the base must end within this distance of its standing spot (release: 0.65 m).
        contact_limit: contact force that makes navigation fail (release: 5 N).
        place_success_distance: a put succeeds when the object rests within this distance of the region (0.5 m).
        reach: planar distance from the base centre within which the arm works (metres).
        arm_speed: largest joint change per control step (radians).
        grasp_distance: largest gap between the grasp point and an object's box for the weld grasp (metres).
        hinge_open: joint target for opening a door (radians).
        slide_open: joint target for opening a drawer (metres).
        controller: base controller gains.
        ik: arm IK settings.
    """

    control_period: float = 0.1
    robot_radius: float = fetch.ROBOT_RADIUS
    clearance: float = 0.03
    grid_resolution: float = 0.05
    nav_success_distance: float = 0.65
    contact_limit: float = 5.0
    place_success_distance: float = 0.5
    reach: float = fetch.ARM_REACH
    arm_speed: float = 0.2
    grasp_distance: float = 0.08
    hinge_open: float = 1.45
    slide_open: float = 0.43
    controller: ControllerConfig = field(default_factory=ControllerConfig)
    ik: IkConfig = field(default_factory=IkConfig)

    def __post_init__(self) -> None:
        require_positive_fields(self, ("control_period", "robot_radius", "grid_resolution", "nav_success_distance",
                                       "contact_limit", "place_success_distance", "reach", "arm_speed",
                                       "grasp_distance", "hinge_open", "slide_open"))
        if self.clearance < 0:
            raise ValueError(f"PrivilegedConfig.clearance: expected >= 0, got {self.clearance}")


class SkillContext(RobotContext[PrivilegedConfig]):
    """The M3 context: the robot plus the privileged scene (layout, instance and container states, arm clearance
    checked against the simulator's furniture)."""

    backend: SimulatedRobot

    def __init__(self, backend: SimulatedRobot, config: PrivilegedConfig,
                 lock: AbstractContextManager[object] | None = None) -> None:
        """Drive `backend`; `lock` serialises backend access with other users (a fresh lock by default)."""
        super().__init__(backend, config, lock)

    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether an arm configuration would hit furniture or walls now."""
        with self.lock:
            return self.backend.arm_collides(arm, torso)

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """Whether a straight joint-space move stays clear of furniture and walls."""
        with self.lock:
            return self.backend.arm_path_free(start, start_torso, end, end_torso)

    # ---- scene -------------------------------------------------------------------------------------------------
    def layout(self) -> SceneLayout:
        """Furniture, parts and support regions of the episode."""
        with self.lock:
            return self.backend.scene_layout()

    def instance(self, name: str) -> InstanceState:
        """The state of the instance called `name` (the best match of a non-exact name)."""
        with self.lock:
            states = self.backend.object_states([name])
        exact = [state for state in states if state.name == name]
        return (exact or states)[0]

    def container(self, name: str) -> ContainerState:
        """The state of the door or drawer called `name` (the best match of a non-exact name)."""
        with self.lock:
            states = self.backend.container_states([name])
        exact = [state for state in states if state.name == name]
        return (exact or states)[0]

    def furniture_of(self, name: str) -> FurnitureLayout | None:
        """The furniture an instance is, belongs to (a door or drawer), or rests on or in (an object)."""
        layout = self.layout()
        piece = layout.piece(name) or layout.owner_of(name)
        if piece is not None:
            return piece
        state = self.instance(name)
        if state.kind == "object" and state.receptacle:
            return self.furniture_of(state.receptacle)
        return None
