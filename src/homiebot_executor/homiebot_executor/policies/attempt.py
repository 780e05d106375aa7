"""What every skill policy that steps a robot shares: the running attempt, stepped and locked robot access, and
the attempt wrapper (arm reset, failure model, statuses).

`RobotContext` wraps one `Robot` (emmoe_core.robot.interface): every call holds `lock`, and `tick` advances control
steps while watching the hand, contacts, the step budget and cancel requests. The M3 skills (privileged) and the
sensor-only skills each extend it with what they know about the scene: M3 asks the simulator, the sensor-only skills
build it from the cameras. The arm routines of homiebot_executor.policies.arm_motion are functions of a context.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from emmoe_core.robot.interface import Robot
from emmoe_core.robot.state import BackendError, PrivilegedAccessError, UnknownNameError

from homiebot_executor.failure_model import FailureModel
from homiebot_executor.monitor import ExecutionWatcher
from homiebot_executor.policies.arm_ik import ArmIk, IkConfig
from homiebot_executor.skills import SkillGoal, SkillOutcome, SkillStatus

Progress = Callable[[str, int, float], None]


class MotionSettings(Protocol):
    """The settings a context steps and moves the arm with (PrivilegedConfig and SensorConfig have them)."""

    @property
    def control_period(self) -> float: ...

    @property
    def contact_limit(self) -> float: ...

    @property
    def arm_speed(self) -> float: ...

    @property
    def ik(self) -> IkConfig: ...


Settings = TypeVar("Settings", bound=MotionSettings)


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


class RobotContext(Generic[Settings]):
    """The robot, the settings and the running attempt, shared by the skill functions."""

    def __init__(self, backend: Robot, config: Settings, lock: AbstractContextManager[object] | None = None
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

    def steps_left(self) -> float:
        """Control steps left in the attempt's budget (infinite outside an attempt or without a budget)."""
        attempt = self.attempt
        if attempt is None or not attempt.goal.step_budget:
            return math.inf
        return attempt.goal.step_budget - attempt.steps

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

    # ---- arm clearance (what each kind of skill knows about the furniture) --------------------------------------
    def arm_collides(self, arm: Sequence[float], torso: float) -> bool:
        """Whether an arm configuration would hit something now (False: nothing known in the way)."""
        return False

    def arm_path_free(self, start: Sequence[float], start_torso: float, end: Sequence[float],
                      end_torso: float) -> bool:
        """Whether a straight joint-space move stays clear (True: nothing known in the way)."""
        return True


Context = TypeVar("Context", bound=RobotContext[Any])


def run_attempt(ctx: Context, goal: SkillGoal,
                functions: dict[str, Callable[[Context, SkillGoal], tuple[SkillStatus, str]]],
                reset: Callable[[Context], None], failure_model: FailureModel | None = None,
                should_cancel: Callable[[], bool] = lambda: False,
                progress: Progress = lambda phase, steps, distance: None) -> SkillOutcome:
    """Run one attempt of `goal`: `reset` the arm, then the skill's function (or a failure the model draws).
    Skill failures never raise; a privileged query refused by the robot ends the attempt as PRIVILEGED_REFUSED."""
    contact_limit = ctx.config.contact_limit
    attempt = Attempt(goal, ExecutionWatcher(contact_limit=contact_limit), should_cancel, progress)
    ctx.attempt = attempt
    try:
        reset(ctx)
        attempt.steps = 0
        attempt.watcher = ExecutionWatcher(held_at_start=ctx.held(), step_budget=goal.step_budget,
                                           contact_limit=contact_limit)
        injected = failure_model.draw(goal.skill, goal.attempt) if failure_model is not None else None
        if injected is not None:
            status, message = _injected(ctx, goal, injected.drop_object)
        else:
            status, message = functions[goal.skill](ctx, goal)
    except Stop as stop:
        status, message = stop.status, stop.message
    except UnknownNameError as error:
        status, message = SkillStatus.UNKNOWN_TARGET, str(error)
    except PrivilegedAccessError as error:
        status, message = SkillStatus.PRIVILEGED_REFUSED, str(error)
    except BackendError as error:
        status, message = SkillStatus.INTERNAL_ERROR, f"simulator: {error}"
    finally:
        ctx.attempt = None
    try:
        with ctx.lock:
            ctx.backend.set_base_velocity(0.0, 0.0)
            held_after: str | None = ctx.backend.held_object() or ""
    except BackendError:
        held_after = None
    return SkillOutcome(status, message, held_after, attempt.steps, attempt.distance)


def _injected(ctx: RobotContext[Any], goal: SkillGoal, drop: bool) -> tuple[SkillStatus, str]:
    """A failure drawn by the failure model: nothing moves, except a dropped object for Put."""
    held = ctx.held()
    if drop and held:
        ctx.allow_release()
        with ctx.lock:
            ctx.backend.open_gripper()
        ctx.tick(5)
        return SkillStatus.INJECTED_FAILURE, f"failure model: {held} dropped"
    return SkillStatus.INJECTED_FAILURE, f"failure model: {goal.skill} attempt failed"
