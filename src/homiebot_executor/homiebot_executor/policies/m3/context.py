"""What every M3 skill shares: the settings, the running attempt, and the stepped, locked access to the robot.

`SkillContext` wraps one `SimulatedRobot` (emmoe_eval.robot.interface): every backend call holds `lock`, and `tick`
advances control steps while watching the hand, contacts, the step budget and cancel requests. The skill modules
(navigate, arm, pick, place, articulate) are functions of a context.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import numpy as np
from emmoe_eval.robot import fetch
from emmoe_eval.robot.interface import SimulatedRobot
from emmoe_eval.robot.layout import FurnitureLayout, SceneLayout
from emmoe_eval.robot.state import ContainerState, InstanceState

from homiebot_executor.monitor import ExecutionWatcher
from homiebot_executor.policies.arm_ik import ArmIk, IkConfig
from homiebot_executor.policies.navigation import ControllerConfig
from homiebot_executor.skills import SkillGoal, SkillStatus

Progress = Callable[[str, int, float], None]
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
        for name in ("control_period", "robot_radius", "grid_resolution", "nav_success_distance", "contact_limit",
                     "place_success_distance", "reach", "arm_speed", "grasp_distance", "hinge_open", "slide_open"):
            if not getattr(self, name) > 0:
                raise ValueError(f"PrivilegedConfig.{name}: expected a positive number, got {getattr(self, name)}")
        if self.clearance < 0:
            raise ValueError(f"PrivilegedConfig.clearance: expected >= 0, got {self.clearance}")


class Stop(Exception):
    """Ends an attempt early with a status."""

    def __init__(self, status: SkillStatus, message: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Attempt:
    """Book-keeping of one running attempt."""

    goal: SkillGoal
    watcher: ExecutionWatcher
    should_cancel: Callable[[], bool]
    progress: Progress
    phase: str = "reset_arm"
    steps: int = 0
    distance: float = float("nan")


class SkillContext:
    """The robot, the settings and the running attempt, shared by the skill functions."""

    def __init__(self, backend: SimulatedRobot, config: PrivilegedConfig, lock: AbstractContextManager[object] | None = None
                 ) -> None:
        """Drive `backend`; `lock` serialises backend access with other users (a fresh lock by default)."""
        self.backend = backend
        self.config = config
        self.lock = lock if lock is not None else threading.RLock()
        self.ik = ArmIk(backend.robot_description(), config.ik)
        self.attempt: Attempt | None = None

    # ---- stepping ----------------------------------------------------------------------------------------------
    def tick(self, count: int = 1) -> None:
        """Advance `count` control steps, watching the hand, contacts, the budget and cancel requests."""
        attempt = self.attempt
        for _ in range(count):
            if attempt is not None and attempt.should_cancel():
                raise Stop(SkillStatus.CANCELED, "cancel requested")
            with self.lock:
                self.backend.step(self.config.control_period)
                held = self.backend.held_object() or ""
                force = self.backend.contact_force()
            if attempt is None:
                continue
            attempt.steps += 1
            incidents = attempt.watcher.observe(attempt.steps, held, force)
            if attempt.steps % 5 == 0:
                attempt.progress(attempt.phase, attempt.steps, attempt.distance)
            drop = next((incident for incident in incidents if incident.kind == "drop"), None)
            if drop is not None:
                raise Stop(SkillStatus.OBJECT_DROPPED, drop.detail)
            if attempt.watcher.saw("timeout"):
                raise Stop(SkillStatus.TIMEOUT, f"step budget of {attempt.goal.step_budget} control steps used up "
                                                f"in phase {attempt.phase}")

    def phase(self, name: str) -> None:
        """Enter a phase of the attempt (reported as progress)."""
        if self.attempt is not None:
            self.attempt.phase = name
            self.attempt.progress(name, self.attempt.steps, self.attempt.distance)

    def allow_release(self) -> None:
        """The object in the hand may now leave it (a put, not a drop)."""
        if self.attempt is not None:
            self.attempt.watcher.release_allowed = True

    # ---- robot -------------------------------------------------------------------------------------------------
    def held(self) -> str:
        """Name of the object in the hand ("" when empty)."""
        with self.lock:
            return self.backend.held_object() or ""

    def base(self) -> tuple[float, float, float]:
        """Base (x, y, yaw)."""
        with self.lock:
            base = self.backend.robot_state().base
        return base.position[0], base.position[1], base.yaw

    def joint_state(self) -> tuple[tuple[float, float, float], dict[str, float]]:
        """Base (x, y, yaw) and joint name -> position."""
        with self.lock:
            state = self.backend.robot_state()
        joints = dict(zip(state.joint_names, state.joint_positions))
        return (state.base.position[0], state.base.position[1], state.base.yaw), joints

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
